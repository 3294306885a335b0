"""Entry scripts and tools called in the test's own process, as their `main` calls the
library, and the one contract run each keeps in a fresh process.

In process (core.params.config_from_argv reads the command line as the entry reads it,
flagfiles and the one line of a bad flag included; an expected error is printed by
core.errors.report as main prints it, so capsys holds the `error:` line):

    status = train_main(['--dataset_name=digits', ...], environ={'TF_CONFIG': ...})
    status, runs = evaluate(['--checkpoint_path=...', ...])      # eval.py
    status, result = export(['--checkpoint_path=...', ...])      # export.py
    status, result = call(ImageConversion, argv, convert_images)  # a tool: its library call
    assert_one_error_line_printed(capsys, status, 'no such checkpoint')

What a tool's `main` adds on top of its library call (the summary it prints, INCOMPLETE for
skipped input) each test states. `run_entry` starts the real script in a fresh interpreter
with a user's environment, for each entry's one contract test (exit status, the one
`error:` line and nothing else on stderr: TensorFlow's start-up notices must be hidden by
the entry itself).
"""

import os
import subprocess
import sys

from core import errors
from core.params import config_from_argv
from evaluation import run
from evaluation.config import EvalConfig
from evaluation.setup import from_run_records
from serving.export_model import ExportConfig, export_saved_model, from_run_record
from training import lifecycle
from training.config import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def call(config_class, argv, work):
  """A tool's main on `argv` in this process: (status, what `work(config)` returned, or
  None after a reported error); `work` is the library call the tool's main makes."""
  try:
    config, _ = config_from_argv(config_class, argv)
    return errors.OK, work(config)
  except errors.EXPECTED as error:
    return errors.report(error), None


def train_main(argv, environ=None):
  """train_image_classifier.py's main on `argv` in this process: its exit status. The task
  is placed from `environ` (not os.environ). A cluster task would start its TensorFlow
  server in this process for good: only tasks refused before their server starts belong
  here (processes are the point of the others: tests/cluster_tasks.py)."""
  try:
    config, _ = config_from_argv(TrainConfig, argv)
    job = lifecycle.resolve_job(config, {} if environ is None else environ)
  except errors.EXPECTED as error:
    return errors.report(error)
  return lifecycle.run_job(job)


def evaluate(argv, on_result=None):
  """eval.py's main on `argv` in this process: (status, [run.Run]); each run's summary
  (what main prints) is `run.summary(r)`. on_result(r): called as each evaluation ends
  (a --watch hands them out one at a time)."""
  results = []
  try:
    config, settings = from_run_records(*config_from_argv(EvalConfig, argv))
    for result in run.evaluations(config, settings):
      results.append(result)
      if on_result:
        on_result(result)
  except errors.EXPECTED as error:
    return errors.report(error), results
  return run.exit_status(config, results), results


def export(argv):
  """export.py's main on `argv` in this process: (status, ExportResult or None)."""
  try:
    config, settings = from_run_record(*config_from_argv(ExportConfig, argv))
    return errors.OK, export_saved_model(config, settings)
  except errors.EXPECTED + (OSError,) as error:
    return errors.report(error), None


def assert_one_error_line_printed(capsys, status, *texts, expected=errors.USAGE):
  """`status` is `expected` and stderr is one `error:` line holding each of `texts` (an
  unexpected error raises in the test: the process's 'no traceback')."""
  err = capsys.readouterr().err
  lines = err.splitlines()
  assert status == expected, (status, err)
  assert len(lines) == 1 and lines[0].startswith('error: '), err
  for text in texts:
    assert text in lines[0], err


def user_env():
  """This environment as a user's shell has it: the repository on PYTHONPATH, without the
  variables that hide or add TensorFlow's start-up notices."""
  values = dict(os.environ, PYTHONPATH=ROOT)
  for name in ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS'):
    values.pop(name, None)
  return values


def run_entry(argv):
  """A fresh `python argv...` from the repository root, as a user starts it."""
  return subprocess.run([sys.executable] + list(argv), cwd=ROOT, env=user_env(),
                        capture_output=True, text=True, timeout=300)


def assert_one_error_line(result, *texts, status=errors.USAGE):
  """A finished process: `status`, no traceback, and stderr exactly one `error:` line
  holding each of `texts`."""
  report = 'exit %d\nstdout:\n%s\nstderr:\n%s' % (result.returncode, result.stdout,
                                                  result.stderr)
  assert 'Traceback' not in result.stderr, report
  assert result.returncode == status, report
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), report
  for text in texts:
    assert text in lines[0], report
