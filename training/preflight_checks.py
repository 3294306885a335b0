"""The checks `python -m training.check_cluster` runs before launch, from the trainer's config.

    results = check_before_launch(config, os.environ)   # [(ok, line)]

The cluster is placed as the trainer places it (`lifecycle.resolve_job`: the flags,
TF_CONFIG or --addressing), then, with no task running: every host resolves, no port of
the cluster is taken (bound on this machine, answering on another host), the dataset split
has a shard file per worker (the trainer's own check, training/setup.py) and train_dir
takes a file (deployment/cluster/preflight.py holds the address and directory checks). Without
--job_name the cluster is seen as its chief sees it. Each result is one line.
"""

import dataclasses

from core import errors
from deployment.cluster import preflight
from resolve import names
from training import lifecycle
from training import setup as train_setup

__all__ = ['check_before_launch', 'place']


def place(config, environ):
  """The Job of the cluster `config` and `environ` describe, as the trainer resolves it;
  the chief's view when --ps_hosts/--worker_hosts come without --job_name. Raises
  ConfigError, also when they describe no cluster."""
  if not config.job_name and (config.ps_hosts or config.worker_hosts):
    config = dataclasses.replace(config, job_name='worker', task_index=0)
  job = lifecycle.resolve_job(config, environ)
  errors.require(job.task is not None, 'no cluster to check: give --ps_hosts and '
                 '--worker_hosts, or TF_CONFIG, or --addressing=slurm|jobset where the '
                 'scheduler sets its environment')
  return job


def _shards(config, task):
  """The trainer's refusal of fewer shard files than workers, from the chief's view."""
  chief = dataclasses.replace(config, worker_replicas=task.num_workers, task=0)
  split = names.dataset_split(config.dataset_name, config.dataset_split_name,
                              config.dataset_dir)
  train_setup._check_input_files(chief, split)  # pylint: disable=protected-access
  return 'the %s split of %s (%s) has a shard file for each of the %d workers' % (
      config.dataset_split_name, config.dataset_name, config.dataset_dir, task.num_workers)


def _results(problems, ok_line):
  return [(False, line) for line in problems] or [(True, ok_line)]


def check_before_launch(config, environ):
  """[(passed, one line)]: a line per check that passed, a line per problem found."""
  try:
    job = place(config, environ)
  except errors.EXPECTED as error:
    return [(False, str(error))]
  task = job.task
  size = '%d ps + %d workers' % (task.num_ps, task.num_workers)
  results = _results(preflight.resolution_problems(task),
                     'every host of the %s resolves (%s)' % (size, task.source))
  results += _results(preflight.port_problems(task),
                      'no port of the %s is taken: free on this machine, nothing '
                      'answering on the other hosts' % size)
  try:
    results.append((True, _shards(job.config, task)))
  except errors.EXPECTED as error:
    results.append((False, str(error)))
  if not config.train_dir:
    results.append((False, '--train_dir is required: where checkpoints and summaries go'))
  else:
    results += _results(preflight.writable_dir_problems(config.train_dir, '--train_dir'),
                        '--train_dir=%s takes files' % config.train_dir)
  return results
