"""What the chief leaves in train_dir about the run itself (docs/monitoring.md).

At the start:
  flags.cfg       a flagfile that replays the run: every training flag except --train_dir
                  (a copied run replayed from it writes where it is told, never into the
                  original) and except the cluster's addresses and this task's place in it
                  (they belong to the cluster, not to the recipe);
                  `python train_image_classifier.py --flagfile=flags.cfg --train_dir=DIR`;
                  when the run resumes, the flags.cfg it finds is first compared with the
                  new flags: a changed learning-rate schedule is named in one log line
                  with the rate at the resumed step before and after;
  TensorBoard     text summaries `run/flags` (the same flags) and `run/topology` (job,
                  clones, devices, batch per clone, worker and global, ps tasks), written
                  with the first step through the run's own summary writer (one events
                  file per run, the chief's);
  an old end marker is removed.
At the end: the end marker (`checkpoints.end_marker`), after the last checkpoint.
"""

import dataclasses
import math
import os

from absl import logging
from tensorboard.summary import v1 as summary_v1

from checkpoints import end_marker, paths
from resolve.run_record import RECORD_FILE
from core.files import write_text_atomically
from core.params import ConfigError, config_from_argv
from training import optimization
from training.config import TrainConfig
from tf_compat import tf

__all__ = ['FLAGFILE', 'flag_lines', 'recorded_config', 'schedule_change', 'per_clone_batch',
           'start_run', 'write_run_summaries', 'end_run']

FLAGFILE = RECORD_FILE  # what eval and export read back (resolve.run_record)
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


def recorded_config(path):
  """The TrainConfig a flags.cfg replays (the fields it leaves out at their defaults).

  Raises:
    ConfigError: a line that is not a training flag of this version (one line naming it).
  """
  return config_from_argv(TrainConfig, ['--flagfile=%s' % path])[0]


def _shown(value):
  return ','.join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def schedule_change(recorded, config, num_samples, global_step):
  """How the learning-rate schedule of `config` differs from the `recorded` run's.

  Returns:
    None when no schedule flag differs, else (changes, before, after): changes lists
    '--name old -> new' per flag of `optimization.SCHEDULE_FLAGS` that differs; before
    and after are the learning rates at `global_step` of the recorded and new schedules.
  """
  changes = ['--%s %s -> %s' % (name, _shown(getattr(recorded, name)),
                                _shown(getattr(config, name)))
             for name in optimization.SCHEDULE_FLAGS
             if getattr(recorded, name) != getattr(config, name)]
  if not changes:
    return None
  old = dataclasses.replace(config, **{name: getattr(recorded, name)
                                       for name in optimization.SCHEDULE_FLAGS})
  before, after = optimization.learning_rates_at([old, config], num_samples, global_step)
  return changes, before, after


def _compare_schedule(setup):
  """Before flags.cfg is rewritten: a resumed run's schedule against the recorded one's.
  A changed rate at the resumed step is a warning (a longer cosine restarts high); a
  change that leaves it alone, one info line."""
  config = setup.config
  path = os.path.join(config.train_dir, FLAGFILE)
  if not setup.resume_checkpoint or not tf.io.gfile.exists(path):
    return
  try:
    recorded = recorded_config(path)
  except ConfigError as error:
    logging.warning('Resuming: the learning-rate schedule is not compared with the '
                    'recorded run\'s, %s does not read as this version\'s flags (%s)',
                    path, error)
    return
  # The record leaves out where the run was (_NOT_REPLAYED), the worker count too: the
  # recorded run is taken to have had this run's workers, so an all-reduce job resumed on
  # its own cluster is not told its batch or schedule changed.
  recorded = dataclasses.replace(recorded, worker_replicas=config.worker_replicas)
  step = paths.global_step_of(tf.train.load_checkpoint(setup.resume_checkpoint),
                              setup.resume_checkpoint)
  _compare_global_batch(recorded, setup, step, path)
  change = schedule_change(recorded, config, setup.dataset.num_samples, step)
  if change is None:
    return
  changes, before, after = change
  if math.isclose(before, after, rel_tol=1e-6):
    logging.info('Resuming at global step %d with the learning-rate flags changed (%s): '
                 'the rate at step %d stays %.6g; later steps follow the new flags',
                 step, ', '.join(changes), step, before)
  else:
    logging.warning('Resuming at global step %d with another learning-rate schedule than '
                    'the run recorded in %s (%s): the rate at step %d was %.6g, it is now '
                    '%.6g', step, path, ', '.join(changes), step, before, after)


def _global_batch_text(config):
  return '%d (%s x %d clone(s)%s)' % (
      optimization.global_batch_size(config), per_clone_batch(config), config.num_clones,
      ' x %d replicas' % optimization.workers_per_update(config)
      if optimization.workers_per_update(config) > 1 else '')


def _compare_global_batch(recorded, setup, step, path):
  """One warning when a resumed run's global batch is not the recorded run's (another
  --num_clones, --batch_size, --num_micro_batches or synchronous replica count)."""
  if optimization.global_batch_size(recorded) == optimization.global_batch_size(setup.config):
    return
  logging.warning('Resuming at global step %d with another global batch than the run '
                  'recorded in %s: %s before, %s now; each step from here takes the new '
                  'batch, and a stop or schedule in epochs counts with it', step, path,
                  _global_batch_text(recorded), _global_batch_text(setup.config))


def per_clone_batch(config):
  """'8 per clone', or '3 per clone x 2 micro-batches' with gradient accumulation."""
  if config.num_micro_batches == 1:
    return '%d per clone' % config.batch_size
  return '%d per clone x %d micro-batches' % (config.batch_size, config.num_micro_batches)


def _topology(setup):
  config = setup.config
  deploy_config = setup.deploy_config
  rows = [('job', 'worker task %d of %d, %d ps task(s), %s'
           % (config.task, config.worker_replicas, config.num_ps_tasks,
              'replicated (all-reduce)' if config.variable_update == 'replicated' else
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


def write_run_summaries(setup, writer):
  """The flags and the topology as TensorBoard text, with `writer` (None: nothing)."""
  config = setup.config
  if writer is None:
    return
  writer.add_summary(summary_v1.text_pb('run/flags', '\n\n'.join(
      '`%s`' % line for line in flag_lines(config))))
  writer.add_summary(summary_v1.text_pb('run/topology', _topology(setup)))


def start_run(setup):
  """The chief's records at the start (see the module doc); others do nothing."""
  config = setup.config
  if not config.is_chief:
    return
  tf.io.gfile.makedirs(config.train_dir)
  end_marker.clear_end_marker(config.train_dir)
  if paths.make_state_relative(config.train_dir):
    logging.info('%s/checkpoint named checkpoints by other paths (a moved or copied run): '
                 'rewritten to names inside this directory', config.train_dir)
  _compare_schedule(setup)
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
