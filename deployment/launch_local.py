r"""Starts a whole parameter-server cluster on this host, one process per task.

    python -m deployment.launch_local --num_ps=1 --num_workers=2 -- \
        --dataset_name=digits --dataset_dir=DIR --model_name=lenet --train_dir=DIR \
        --sync_replicas --replicas_to_aggregate=2 --max_number_of_steps=200

Every task runs `train_image_classifier.py` with the training flags after `--` plus its
place in the cluster (`--ps_hosts --worker_hosts --job_name --task_index`, or TF_CONFIG
with `--addressing=tf_config`), on 127.0.0.1 ports picked free. Each task writes one log,
`<log_dir>/<job>-<index>.log` (default log_dir: `<train_dir>/logs`).

TensorFlow's gRPC server listens on every interface and has no authentication, so the
tasks run in a private network namespace when this host allows one
(`--isolation=auto`, see deployment/netns.py): their ports then exist only inside it. If
it does not, the start-up line says that the ports are open on all interfaces.

The launcher forwards Ctrl-C and SIGTERM (workers first, then parameter servers, which
would also leave on their own), stops every process it started when any task fails or
when it ends, and exits with the chief's status, or with the status of the first task
that failed (a failure is never reported as success). A second Ctrl-C kills at once.
"""

import ctypes
import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import time

from absl import app, flags

import portpicker

from core.params import parse_flags
from deployment.netns import NamespaceUnavailable, PrivateNetwork

__all__ = ['LocalCluster', 'Task', 'CLUSTER_FLAGS']

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')
# Flags the launcher owns: given among the training flags they would contradict it.
CLUSTER_FLAGS = ('ps_hosts', 'worker_hosts', 'job_name', 'task_index', 'master',
                 'worker_replicas', 'num_ps_tasks', 'task')
ISOLATIONS = ('auto', 'namespace', 'none')
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
ADDRESSINGS = ('flags', 'tf_config')


def _prepare_child(cores):
  """In the forked child: SIGTERM it when its parent dies; pin it to `cores`.

  Tasks run in sessions of their own (so a terminal's Ctrl-C reaches the launcher only);
  the parent-death signal keeps them from outliving a launcher killed with SIGKILL.
  """
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
  if cores:
    os.sched_setaffinity(0, cores)


@dataclasses.dataclass
class Task:
  job: str
  index: int
  port: int
  log_path: str
  process: subprocess.Popen = None
  starts: int = 0

  name = property(lambda self: '%s-%d' % (self.job, self.index))

  @property
  def returncode(self):
    """Exit status (128 + signal number when killed), None while running or unstarted."""
    code = None if self.process is None else self.process.poll()
    return 128 - code if code is not None and code < 0 else code


class LocalCluster:
  """A ps/worker cluster of local processes; a context manager that kills them all.

  Args:
    num_ps, num_workers: task counts (>= 1 each).
    train_flags: training flags for every task (no cluster flags).
    log_dir: where `<job>-<index>.log` go; created.
    isolation: 'auto' (private network namespace if possible), 'namespace' (required),
      'none' (ports open on all interfaces).
    addressing: 'flags' or 'tf_config' (worker 0 becomes TF_CONFIG's chief).
    script: the training program.
    cpu_affinity: optional {task name: [cpu, ...]} ('worker-0': [0]).
    env: extra environment variables for every task.
  """

  def __init__(self, num_ps, num_workers, train_flags, log_dir, isolation='auto',
               addressing='flags', script=TRAIN_SCRIPT, cpu_affinity=None, env=None):
    if num_ps < 1 or num_workers < 1:
      raise ValueError('num_ps=%d, num_workers=%d: both must be >= 1' % (num_ps, num_workers))
    if isolation not in ISOLATIONS or addressing not in ADDRESSINGS:
      raise ValueError('isolation=%r, addressing=%r; valid: %s; %s' % (
          isolation, addressing, ', '.join(ISOLATIONS), ', '.join(ADDRESSINGS)))
    owned = [f for f in train_flags if f.lstrip('-').split('=')[0] in CLUSTER_FLAGS]
    if owned:
      raise ValueError('the launcher sets the cluster flags; remove %s from the training '
                       'flags' % ', '.join(owned))
    os.makedirs(log_dir, exist_ok=True)
    self.train_flags = list(train_flags)
    self.log_dir = log_dir
    self.isolation, self.addressing, self.script = isolation, addressing, script
    self.cpu_affinity = dict(cpu_affinity or {})
    self.env = dict(env or {})
    self.network = None
    self.isolation_note = ''
    self.tasks = [Task(job, i, portpicker.pick_unused_port(),
                       os.path.join(log_dir, '%s-%d.log' % (job, i)))
                  for job, count in (('ps', num_ps), ('worker', num_workers))
                  for i in range(count)]

  def task(self, name):
    return next(t for t in self.tasks if t.name == name)

  @property
  def chief(self):
    return self.task('worker-0')

  def hosts(self, job):
    return ['127.0.0.1:%d' % t.port for t in self.tasks if t.job == job]

  def isolate(self):
    """Creates the private network namespace (or notes why not); before any task."""
    if self.network is not None:
      return
    if self.isolation == 'none':
      self.isolation_note = ('NOT isolated (--isolation=none): TensorFlow listens on all '
                             'interfaces (*:port) without authentication')
      return
    try:
      self.network = PrivateNetwork.create()
    except NamespaceUnavailable as error:
      if self.isolation == 'namespace':
        raise
      self.isolation_note = (
          'NOT isolated: TensorFlow listens on all interfaces (*:port) without '
          'authentication and a private network namespace is unavailable here (%s); '
          'firewall these ports (docs/cluster.md)' % error)
      return
    self.isolation_note = ('in a private network namespace (held by pid %d): the ports '
                           'are reachable only from inside it' % self.network.pid)

  def startup_line(self):
    ports = '; '.join('%s %s' % (job, ','.join(h.split(':')[1] for h in self.hosts(job)))
                      for job in ('ps', 'worker'))
    return ('launch_local: %d ps + %d workers on 127.0.0.1 (ports: %s), %s; logs: %s' % (
        len(self.hosts('ps')), len(self.hosts('worker')), ports, self.isolation_note,
        self.log_dir))

  def command(self, task):
    argv = [sys.executable, self.script] + self.train_flags
    if self.addressing == 'flags':
      argv += ['--ps_hosts=' + ','.join(self.hosts('ps')),
               '--worker_hosts=' + ','.join(self.hosts('worker')),
               '--job_name=' + task.job, '--task_index=%d' % task.index]
    return self.network.wrap(argv) if self.network else argv

  def _environment(self, task):
    env = dict(os.environ)
    env.pop('TF_CONFIG', None)
    env.update(self.env)
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    if self.addressing == 'tf_config':
      workers = self.hosts('worker')
      cluster = {'chief': workers[:1], 'worker': workers[1:], 'ps': self.hosts('ps')}
      kind, index = ((task.job, task.index) if task.job == 'ps' else
                     ('chief', 0) if task.index == 0 else ('worker', task.index - 1))
      env['TF_CONFIG'] = json.dumps({'cluster': cluster,
                                     'task': {'type': kind, 'index': index}})
    return env

  def start_task(self, name):
    """(Re)starts one task, appending to its log."""
    task = self.task(name)
    if task.process is not None and task.process.poll() is None:
      raise RuntimeError('%s is still running (pid %d)' % (name, task.process.pid))
    cores = self.cpu_affinity.get(name)
    with open(task.log_path, 'ab') as log:
      log.write(('=== %s start %d at %s\n' % (name, task.starts + 1, time.strftime(
          '%H:%M:%S'))).encode())
      log.flush()
      task.process = subprocess.Popen(
          self.command(task), cwd=ROOT, env=self._environment(task), stdout=log,
          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
          preexec_fn=functools.partial(_prepare_child, cores))
    task.starts += 1
    return task

  def start(self):
    self.isolate()
    for task in self.tasks:
      self.start_task(task.name)
    return self

  def signal(self, name, signum):
    task = self.task(name)
    if task.process is not None and task.process.poll() is None:
      task.process.send_signal(signum)

  def wait(self, name, timeout):
    """The task's exit status; None if it is still running after `timeout` seconds."""
    try:
      self.task(name).process.wait(timeout)
    except subprocess.TimeoutExpired:
      return None
    return self.task(name).returncode

  def running(self, job=None):
    return [t for t in self.tasks if t.returncode is None and t.process is not None
            and job in (None, t.job)]

  def _wait_all(self, tasks, timeout):
    deadline = time.time() + timeout
    while any(t.returncode is None for t in tasks) and time.time() < deadline:
      time.sleep(0.1)

  def stop(self, grace_secs=30.0):
    """SIGTERM to workers, then to parameter servers, SIGKILL after `grace_secs` each."""
    for job in ('worker', 'ps'):
      tasks = self.running(job)
      for task in tasks:
        task.process.send_signal(signal.SIGTERM)
      self._wait_all(tasks, grace_secs)
    self.kill()

  def kill(self):
    for task in self.running():
      task.process.kill()
    for task in self.tasks:
      if task.process is not None:
        task.process.wait()
    if self.network is not None:
      self.network.close()
      self.network = None

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc_info):
    self.kill()

  def supervise(self, stop_requested, grace_secs=30.0, poll_secs=0.2):
    """Waits for the job; returns the launcher's exit status (see the module doc).

    `stop_requested()` is polled: when it turns true the cluster is stopped gracefully.
    """
    while True:
      failed = [t for t in self.tasks if t.returncode not in (None, 0)]
      if failed:
        first = failed[0]
        print('launch_local: %s exited with status %d; stopping the cluster (log: %s)' % (
            first.name, first.returncode, first.log_path), flush=True)
        self.stop(grace_secs)
        return self.chief.returncode or first.returncode
      if self.chief.returncode == 0:
        self._wait_all(self.tasks, grace_secs)
        late = self.running()
        if late:
          print('launch_local: the chief finished; %s still running after %g s: killed' % (
              ', '.join(t.name for t in late), grace_secs), flush=True)
        self.kill()
        return 0
      if stop_requested():
        print('launch_local: stopping the cluster (SIGTERM to workers, then ps)', flush=True)
        self.stop(grace_secs)
        return self.chief.returncode or next(
            (t.returncode for t in self.tasks if t.returncode), 0)
      time.sleep(poll_secs)


def _define_flags():
  """The launcher's own flags; defined only when it runs, not when imported."""
  flags.DEFINE_integer('num_ps', 1, 'Parameter-server tasks.')
  flags.DEFINE_integer('num_workers', 2, 'Worker tasks; worker 0 is the chief.')
  # --log_dir (where <job>-<index>.log go; default <train_dir>/logs) is absl.logging's own
  # flag, reused: absl writes no files there unless asked to.
  flags.DEFINE_enum('isolation', 'auto', ISOLATIONS, 'auto: a private network namespace '
                    'when possible; namespace: required; none: ports on all interfaces.')
  flags.DEFINE_enum('addressing', 'flags', ADDRESSINGS, 'How tasks learn the cluster: '
                    '--ps_hosts/... flags or TF_CONFIG.')
  flags.DEFINE_float('stop_timeout_secs', 60.0, 'After SIGTERM, how long a task may take '
                     'before it is killed.')


FLAGS = flags.FLAGS


def _train_dir(train_flags):
  for i, flag in enumerate(train_flags):
    if flag.startswith('--train_dir='):
      return flag.split('=', 1)[1]
    if flag == '--train_dir' and i + 1 < len(train_flags):
      return train_flags[i + 1]
  return None


class _Signals:
  """First SIGINT/SIGTERM: stop gracefully; the second: kill everything now."""

  def __init__(self, cluster):
    self.count = 0
    self.cluster = cluster
    for signum in (signal.SIGINT, signal.SIGTERM):
      signal.signal(signum, self._handle)

  def _handle(self, signum, frame):
    del frame
    self.count += 1
    if self.count > 1:
      print('launch_local: %s again: killing every task' % signal.Signals(signum).name,
            flush=True)
      self.cluster.kill()
      sys.exit(128 + signum)


def main(argv):
  train_flags = argv[1:]
  log_dir = FLAGS.log_dir or (_train_dir(train_flags) and
                              os.path.join(_train_dir(train_flags), 'logs'))
  if not log_dir:
    print('error: --log_dir is required when --train_dir is not among the training flags '
          '(after --)', file=sys.stderr)
    return 2
  if FLAGS.num_ps < 1 or FLAGS.num_workers < 1:
    print('error: --num_ps=%d, --num_workers=%d: both must be >= 1' % (
        FLAGS.num_ps, FLAGS.num_workers), file=sys.stderr)
    return 2
  try:
    cluster = LocalCluster(FLAGS.num_ps, FLAGS.num_workers, train_flags, log_dir,
                           isolation=FLAGS.isolation, addressing=FLAGS.addressing)
  except ValueError as error:
    print('error: %s' % error, file=sys.stderr)
    return 2
  signals = _Signals(cluster)
  try:
    cluster.start()
    print(cluster.startup_line(), flush=True)
    status = cluster.supervise(lambda: signals.count > 0, FLAGS.stop_timeout_secs)
  except NamespaceUnavailable as error:
    print('error: --isolation=namespace: %s' % error, file=sys.stderr)
    return 2
  finally:
    cluster.kill()
  print('launch_local: done, status %d (%s; chief log: %s)' % (
      status, ', '.join('%s: %s' % (t.name, t.returncode) for t in cluster.tasks),
      cluster.chief.log_path), flush=True)
  return status


if __name__ == '__main__':
  _define_flags()
  app.run(main, flags_parser=parse_flags)
