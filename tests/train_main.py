"""train_image_classifier.py's `main`, called in the test's own process.

    status = train_main(['--dataset_name=digits', ...], environ={'TF_CONFIG': ...})

The same steps as the script's main: the flags read as the entry reads them
(core.params.config_from_argv: flagfiles, the one line of a bad flag or a positional
argument), the task placed in its cluster (lifecycle.resolve_job, from `environ` instead of
os.environ), the job run (lifecycle.run_job), an expected error printed as its one
`error:` line (core.errors.report); returns the exit status. A test reads the lines with
capsys (capfd for TensorFlow's own) and the log with caplog. A cluster task would start
its TensorFlow server in this process for good: only tasks refused before their server
starts belong here (processes are the point of the others: tests/cluster_tasks.py).
"""

from core import errors
from core.params import config_from_argv
from training import lifecycle
from training.config import TrainConfig


def train_main(argv, environ=None):
  """The exit status train_image_classifier.py returns for `argv` (without the program)."""
  try:
    config, _ = config_from_argv(TrainConfig, argv)
    job = lifecycle.resolve_job(config, {} if environ is None else environ)
  except errors.EXPECTED as error:
    return errors.report(error)
  return lifecycle.run_job(job)
