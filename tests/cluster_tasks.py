"""Helpers for the multi-process cluster tests: commands, waiting on logs, reading results.

Every cluster test starts real processes on 127.0.0.1 (deployment.cluster.launch_local's
LocalCluster, one log per task) and kills them all in `finally` (LocalCluster is a
context manager). Timeouts are short: a missing task is detected in seconds, not the
defaults' minutes.
"""

import glob
import os
import re
import socket
import sys
import time

STEP_LINE = re.compile(r'\] step (\d+)(?: of \d+)?: loss = ')
READY_LINE = re.compile(r'Session ready at global step (\d+)')
LEAVE_LINE = re.compile(r'Worker (\d+) leaves: \w+ at global step \d+ \([^;]*; (\d+) steps, '
                        r'(\d+) counted by the parameter servers(?:, (\d+) with a stale '
                        r'gradient dropped)?\)')
WAIT_SECS = 150  # Upper bound for one cluster run on a loaded 2-core machine.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')


def train_flags(dataset_dir, train_dir, dataset_name='digits', **overrides):
  """Training flags for a small, quick LeNet run with test-sized timeouts."""
  values = dict(
      dataset_name=dataset_name, dataset_dir=dataset_dir, model_name='lenet',
      train_dir=str(train_dir), optimizer='sgd', learning_rate=0.01,
      learning_rate_decay_type='fixed', batch_size=16, num_readers=1,
      num_preprocessing_threads=1, log_every_n_steps=5, max_number_of_steps=30,
      save_interval_secs=600, save_summaries_secs=600, recovery_wait_secs=0.2,
      startup_timeout_secs=90, step_timeout_secs=60, stop_grace_secs=3)
  values.update(overrides)
  flags = []
  for name, value in values.items():
    if value is True:
      flags.append('--%s' % name)
    elif value is False:
      flags.append('--no%s' % name)
    else:
      flags.append('--%s=%s' % (name, value))
  return flags


def free_ports(count):
  """`count` distinct ports of 127.0.0.1 that were free a moment ago."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for each in sockets:
      each.bind(('127.0.0.1', 0))
    return [each.getsockname()[1] for each in sockets]
  finally:
    for each in sockets:
      each.close()


def trainer(flags):
  """The command a LocalCluster task runs to train: this Python, the trainer, `flags`."""
  return [sys.executable, TRAIN_SCRIPT] + list(flags)


def log_text(task):
  with open(task.log_path, errors='replace') as log:
    return log.read()


def last_start(text):
  """The part of a task log written by its latest start."""
  return text.rsplit('=== ', 1)[-1]


def steps(text):
  return [int(s) for s in STEP_LINE.findall(text)]


def ready_steps(text):
  return [int(s) for s in READY_LINE.findall(text)]


def wait_for(condition, what, timeout=WAIT_SECS, cluster=None):
  """Polls `condition()` until true; fails with `what` and the task logs' tails."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    if condition():
      return
    time.sleep(0.2)
  tails = ''
  if cluster is not None:
    tails = '\n'.join('--- %s (status %s)\n%s' % (t.name, t.returncode,
                                                   log_text(t)[-3000:])
                      for t in cluster.tasks)
  raise AssertionError('timed out after %d s waiting for %s\n%s' % (timeout, what, tails))


def wait_for_step(cluster, name, step):
  wait_for(lambda: max(steps(log_text(cluster.task(name))) or [0]) >= step,
           '%s to log step %d' % (name, step), cluster=cluster)


def assert_clean_log(text, name=''):
  assert 'Traceback' not in text, '%s\n%s' % (name, text[-4000:])
  assert 'Coordinator stopped with threads still running' not in text, name


def checkpoint_steps(train_dir):
  return sorted(int(re.search(r'model\.ckpt-(\d+)\.index$', path).group(1))
                for path in glob.glob(os.path.join(str(train_dir), 'model.ckpt-*.index')))


def error_lines(text):
  return [line for line in text.splitlines() if line.startswith('error: ')]


def leave_counts(text):
  """(steps run, steps the ps counted, stale or None) from a worker's leaving line."""
  found = LEAVE_LINE.findall(text)
  assert len(found) == 1, text[-3000:]
  _, local, counted, stale = found[0]
  return int(local), int(counted), int(stale) if stale else None


def chief_scalars(train_dir):
  """{tag: [(wall time, step, value)]} of the scalars in train_dir's event files,
  read with TensorBoard's own event reader."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=import-outside-toplevel
  scalars = {}
  for path in sorted(glob.glob(os.path.join(str(train_dir), 'events.out.tfevents.*'))):
    accumulator = event_accumulator.EventAccumulator(
        path, size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    for tag in accumulator.Tags()['scalars']:
      scalars.setdefault(tag, []).extend(
          (e.wall_time, e.step, e.value) for e in accumulator.Scalars(tag))
  return scalars


def all_reduce(target, index, group_size, deadline_secs=60):
  """[1 + index, 2] all-reduced (added) by worker `index` of a cluster of workers without
  ps, through its server at `target`, with the other `group_size` - 1 (group 1, instance 1;
  under `deadline_secs`)."""
  # pylint: disable=import-outside-toplevel
  from tensorflow.python.ops import collective_ops
  from tf_compat import tf
  with tf.Graph().as_default():
    with tf.device('/job:worker/task:%d/device:CPU:0' % index):
      total = collective_ops.all_reduce(tf.constant([1.0 + index, 2.0]), group_size,
                                        group_key=1, instance_key=1, merge_op='Add',
                                        final_op='Id')
    config = tf.ConfigProto(device_filters=['/job:worker/task:%d' % index])
    with tf.Session(target, config=config) as sess:
      return sess.run(total, options=tf.RunOptions(
          timeout_in_ms=int(deadline_secs * 1000))).tolist()


def serve_worker(hosts, index, all_reduce_first=False):
  """Worker `index` of a cluster of workers without ps at `hosts`, its server started by
  ps_cluster.start_server: prints 'serving'; with `all_reduce_first`, all-reduces with
  every worker (`all_reduce`, group of all) and prints 'sum [...]'; then serves until
  killed. Run as `python -m tests.cluster_tasks HOSTS INDEX [all_reduce]`
  (`serve_command`)."""
  from deployment.cluster import ps_cluster, task_spec  # pylint: disable=import-outside-toplevel
  task = task_spec.TaskSpec((), tuple(hosts), 'worker', index)
  server = ps_cluster.start_server(task, names_timeout_secs=5)
  print('serving', flush=True)
  if all_reduce_first:
    print('sum', all_reduce(server.target, index, len(hosts)), flush=True)
  time.sleep(WAIT_SECS)


def serve_command(hosts, index, all_reduce_first=False):
  return [sys.executable, '-m', 'tests.cluster_tasks', ','.join(hosts), str(index)] + (
      ['all_reduce'] if all_reduce_first else [])


if __name__ == '__main__':
  serve_worker(sys.argv[1].split(','), int(sys.argv[2]), sys.argv[3:] == ['all_reduce'])
