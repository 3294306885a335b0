"""Running deployment.launch_local in tests: the launcher's command line around the real
trainer, a stand-in task (no TensorFlow) for the tests whose point is the launcher's
own supervision (ordering, signals, logs, exit statuses), not the trainer; and the global
batch's reference (tests/global_batch.py) made once per run for every cluster compared
with it (here, without ps, and under Slurm)."""

import os
import pathlib
import sys

from deployment.cluster.launch_local import LocalCluster
from tests.cluster_tasks import ROOT
from tests.global_batch import sync_reference
from tests.once import made_once


def shared_sync_reference(tmp_path_factory, train_dir):
  """tests/global_batch.sync_reference made once per run (tests/once.py: its data and its
  start and reference checkpoints are read-only to the clusters, which fine-tune from the
  start into a train_dir of their own); -> (its cluster flags, training into `train_dir`,
  the reference checkpoint, the start checkpoint)."""
  flags, reference, start = made_once(
      tmp_path_factory, 'sync_reference', lambda directory: sync_reference(
          pathlib.Path(directory)))
  flags = [('--train_dir=%s' % train_dir) if flag.startswith('--train_dir=') else flag
           for flag in flags]
  assert '--train_dir=%s' % train_dir in flags, flags
  return flags, reference, start


def launcher_argv(num_ps, num_workers, flags, *launcher_flags):
  """The launcher running the trainer with `flags` (run from ROOT)."""
  return ([sys.executable, '-m', 'deployment.launch_local', '--num_ps=%d' % num_ps,
           '--num_workers=%d' % num_workers] + list(launcher_flags) +
          ['--', sys.executable, 'train_image_classifier.py'] + flags)


def environment():
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop('TF_CONFIG', None)
  return env


# A stand-in for a trainer: no TensorFlow, behaviour chosen per task by
# --behaviour=<task>:<action>,... (exit<N>: exit with N after 0.3 s; finish: exit 0 after
# 0.3 s, once every task is ready; listen: listen on the task's port on all interfaces, as
# TensorFlow's server does, and run; otherwise run until SIGTERM, then print it and exit 0).
# Each prints 'ready' (and marks --ready_dir) once its SIGTERM handler is in place: tests
# that signal a task wait for that.
FAKE_TASK = r'''
import os, signal, socket, sys, time
args = dict(a.lstrip('-').split('=', 1) for a in sys.argv[1:] if '=' in a)
name = '%s-%s' % (args['job_name'], args['task_index'])
plan = dict(item.split(':') for item in args.get('behaviour', '').split(',') if item)
def stop(signum, frame):
  print('%s got %s at %.3f' % (name, signal.Signals(signum).name, time.time()), flush=True)
  sys.exit(0)
signal.signal(signal.SIGTERM, stop)
action = plan.get(name, 'run')
if action == 'listen':
  hosts = args['%s_hosts' % args['job_name']].split(',')
  server = socket.socket(socket.AF_INET6)
  server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
  server.bind(('::', int(hosts[int(args['task_index'])].rsplit(':', 1)[1])))
  server.listen()
  print('%s listening' % name, flush=True)
print('%s ready' % name, flush=True)
open(os.path.join(args['ready_dir'], name), 'w').close()
if action not in ('run', 'listen'):
  while len(os.listdir(args['ready_dir'])) < int(args['num_tasks']):
    time.sleep(0.02)  # Every task can take SIGTERM: now end.
  time.sleep(0.3)
  sys.exit(0 if action == 'finish' else int(action[4:]))
while True:
  time.sleep(0.02)
'''


def fake_task_command(directory, behaviour, num_tasks):
  """The stand-in's command (its script and ready directory made in `directory`)."""
  os.makedirs(directory, exist_ok=True)
  script = os.path.join(str(directory), 'fake_task.py')
  with open(script, 'w') as handle:
    handle.write(FAKE_TASK)
  ready = os.path.join(str(directory), 'ready')
  os.makedirs(ready)
  return [sys.executable, script, '--behaviour=' + behaviour, '--ready_dir=%s' % ready,
          '--num_tasks=%d' % num_tasks]


def fake_cluster(directory, behaviour, num_workers=2, num_ps=1, isolation='none'):
  """A LocalCluster of stand-in tasks logging into <directory>/logs."""
  command = fake_task_command(directory, behaviour, num_ps + num_workers)
  return LocalCluster(num_ps, num_workers, command, os.path.join(str(directory), 'logs'),
                      isolation=isolation)


def all_ready(log_dir, names):
  return all(os.path.exists(os.path.join(log_dir, n + '.log')) and
             ' ready' in open(os.path.join(log_dir, n + '.log')).read() for n in names)


def sigterm_time(cluster, name):
  text = open(cluster.task(name).log_path).read()
  return float(text.split(' got SIGTERM at ')[1].split()[0])
