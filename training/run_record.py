"""What the chief leaves in train_dir about the run itself (docs/monitoring.md).

At the start:
  flags.cfg       a flagfile that replays the run: every training flag except --train_dir
                  (a copied run replayed from it writes where it is told, never into the
                  original) and except the cluster's addresses and this task's place in it
                  (they belong to the cluster, not to the recipe);
                  `python train_image_classifier.py --flagfile=flags.cfg --train_dir=DIR`
  TensorBoard     text summaries `run/flags` (the same flags) and `run/topology` (job,
                  clones, devices, batch per clone, worker and global, ps tasks), written
                  with the first step through the run's own summary writer (one events
                  file per run, the chief's);
  an old end marker is removed.
At the end: the end marker (`checkpoints.end_marker`), after the last checkpoint.
"""

import dataclasses
import os

from absl import logging
from tensorboard.summary import v1 as summary_v1

from checkpoints import end_marker, paths
from core.files import write_text_atomically
from training import optimization
from training.config import TrainConfig
from tf_compat import tf

__all__ = ['FLAGFILE', 'flag_lines', 'per_clone_batch', 'start_run', 'write_run_summaries',
           'end_run']

FLAGFILE = 'flags.cfg'
# Where the run was, not what it was: left out of the replayable flagfile.
_NOT_REPLAYED = ('train_dir', 'master', 'ps_hosts', 'worker_hosts', 'job_name', 'task_index',
                 'task', 'worker_replicas', 'num_ps_tasks')


def _flag(name, value):
  if isinstance(value, bool):
    return '--%s%s' % ('' if value else 'no', name)
  if isinstance(value, tuple):
    return '--%s=%s' % (name, ','.join(str(v) for v in value))
  return '--%s=%s' % (name, value)


def flag_lines(config):
  """`--name=value` for every field of `config` that replays the run (unset ones left out)."""
  return [_flag(field.name, getattr(config, field.name))
          for field in dataclasses.fields(TrainConfig)
          if field.name not in _NOT_REPLAYED and getattr(config, field.name) is not None
          and getattr(config, field.name) != ()]


def per_clone_batch(config):
  """'8 per clone', or '3 per clone x 2 micro-batches' with gradient accumulation."""
  if config.num_micro_batches == 1:
    return '%d per clone' % config.batch_size
  return '%d per clone x %d micro-batches' % (config.batch_size, config.num_micro_batches)


def _topology(config, setup):
  deploy_config = setup.deploy_config
  rows = [('job', 'worker task %d of %d, %d ps task(s), %s'
           % (config.task, config.worker_replicas, config.num_ps_tasks,
              'sync' if config.sync_replicas else
              ('async' if config.worker_replicas > 1 else 'local'))),
          ('clones', '%d on %s' % (config.num_clones, ', '.join(
              deploy_config.clone_device(i) for i in range(config.num_clones)))),
          ('batch', '%s, %d per worker step, %d global'
           % (per_clone_batch(config), optimization.examples_per_worker_step(config),
              setup.global_batch)),
          ('data', '%s/%s, %d examples' % (config.dataset_name, config.dataset_split_name,
                                            setup.dataset.num_samples)),
          ('model', config.model_name)]
  return '\n'.join(['| what | value |', '|---|---|'] + ['| %s | %s |' % row for row in rows])


def write_run_summaries(config, setup, writer):
  """The flags and the topology as TensorBoard text, with `writer` (None: nothing)."""
  if writer is None:
    return
  writer.add_summary(summary_v1.text_pb('run/flags', '\n\n'.join(
      '`%s`' % line for line in flag_lines(config))))
  writer.add_summary(summary_v1.text_pb('run/topology', _topology(config, setup)))


def start_run(config, setup):
  """The chief's records at the start (see the module doc); others do nothing."""
  if not config.is_chief:
    return
  tf.io.gfile.makedirs(config.train_dir)
  end_marker.clear_end_marker(config.train_dir)
  if paths.make_state_relative(config.train_dir):
    logging.info('%s/checkpoint named checkpoints by other paths (a moved or copied run): '
                 'rewritten to names inside this directory', config.train_dir)
  lines = flag_lines(config)
  text = ('# Replay: python train_image_classifier.py --flagfile=%s --train_dir=DIR\n'
          '# (the cluster addresses and this task are not part of the recipe)\n%s\n'
          % (FLAGFILE, '\n'.join(lines)))
  write_text_atomically(os.path.join(config.train_dir, FLAGFILE), text)


def end_run(config, finished, global_step, checkpoint):
  """The chief's end marker: finished, or stopped (SIGTERM, preemption)."""
  if not config.is_chief or global_step is None:
    return
  status = end_marker.FINISHED if finished else end_marker.STOPPED
  end_marker.write_end_marker(config.train_dir, status, global_step, checkpoint)
  logging.info('Training %s at step %d; wrote %s', status, global_step,
               end_marker.END_MARKER_FILE)
