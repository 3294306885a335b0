"""A whole parameter-server cluster on this host, one process per task: the work of
`python -m deployment.launch_local`.

`LocalCluster(num_ps, num_workers, command, log_dir)` starts every task as the same
`command` (any program that joins a TensorFlow cluster) plus its place in the cluster
(num_ps 0: workers only, which all-reduce; no ps flag or TF_CONFIG key then):
`--ps_hosts --worker_hosts --job_name --task_index` appended, or TF_CONFIG in its
environment (`addressing='tf_config'`), TensorFlow's two conventions, which
deployment/cluster/task_spec.py reads. Ports on 127.0.0.1 are picked free; each task
writes one log, `<log_dir>/<job>-<index>.log`, appended to on a restart. Tasks run in the
launcher's working directory and environment.

TensorFlow's gRPC server listens on every interface and has no authentication, so the
tasks run in a private network namespace when this host allows one
(`isolation='auto'`, see deployment/cluster/netns.py): their ports then exist only inside it. If
it does not, the start-up line says that the ports are open on all interfaces.

With `num_data_workers` N > 0 a tf.data service starts first beside them: a dispatcher
(its journal in <log_dir>/data_service) and N data workers, each `python -m
datasets.data_service` (a command: deployment imports no datasets), and the training tasks
get `--data_service_address`. A dispatcher or data worker that ends is restarted on its
port (the dispatcher with its journal), up to MAX_SERVICE_RESTARTS times each: every
epoch is a job of the dispatcher that gives each data worker it ever had a share, so the
end of an epoch waits for a lost data worker to come back at its address. Past that it is
one line and training goes on to the epoch's end; the trainer's watchdog then ends the job
(138, naming the data worker it waits for).

`launch(config, command)` runs one job to its end: it forwards Ctrl-C and SIGTERM (workers
first, then parameter servers, which would also leave on their own, then the data
service), stops every process it started when any training task fails or when it ends,
and returns the chief's status, or the status of the first task that failed (a failure is
never reported as success). A second Ctrl-C kills at once.
"""

import ctypes
import dataclasses
import functools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Optional

import portpicker

from core.params import ConfigError, param
from deployment.cluster.netns import NamespaceUnavailable, PrivateNetwork

__all__ = ['LaunchConfig', 'launch', 'LocalCluster', 'Task', 'ADDRESSING_FLAGS']

# TensorFlow's cluster flags (task_spec reads them): the launcher appends them to the
# command, so the command must not carry them itself.
ADDRESSING_FLAGS = ('ps_hosts', 'worker_hosts', 'job_name', 'task_index')
SERVICE_FLAG = 'data_service_address'  # Given to the training tasks with a data service.
SERVICE_JOBS = ('dispatcher', 'data_worker')
MAX_SERVICE_RESTARTS = 3
# The repository root, three levels above deployment/cluster/launch_local.py, on the service
# tasks' path for `-m datasets...`.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOLATIONS = ('auto', 'namespace', 'none')
ADDRESSINGS = ('flags', 'tf_config')
DEFAULT_LOG_DIR = os.path.join('runs', 'launch_local')
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
  """The launcher's flags (`python -m deployment.launch_local`); the command every task
  runs comes after `--` and is not part of it. LocalCluster checks the values."""
  # Cluster.
  num_ps: int = param(1, 'Parameter-server tasks; 0 = none: the workers all-reduce (the '
                      'command then carries --variable_update=replicated).')
  num_workers: int = param(2, 'Worker tasks; worker 0 is the chief.')
  addressing: str = param('flags', 'How tasks learn the cluster: flags (--ps_hosts, '
                          '--worker_hosts, --job_name, --task_index appended to the '
                          'command) or tf_config (the TF_CONFIG environment variable).')
  isolation: str = param('auto', 'auto: a private network namespace when possible; '
                         'namespace: required; none: ports on all interfaces.')
  # Input service (docs/data_service.md).
  num_data_workers: int = param(
      0, 'tf.data service data workers started, with their dispatcher, before the tasks '
      '(python -m datasets.data_service); the training tasks get --data_service_address '
      'and read their input from them. 0 = none: each worker reads its own.')
  # Supervision.
  task_log_dir: Optional[str] = param(DEFAULT_LOG_DIR, 'Directory of the tasks\' logs, '
                                      '<job>-<index>.log each, appended to by a relaunch.')
  stop_timeout_secs: float = param(60.0, 'After SIGTERM, how long a task may take before '
                                   'it is killed.')


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


def _check(num_ps, num_workers, command, log_dir, isolation, addressing, num_data_workers):
  """ConfigError (one line naming the flag) for settings no cluster can run with."""
  if num_ps < 0 or num_workers < 1:
    raise ConfigError('--num_ps=%d, --num_workers=%d: --num_ps must be >= 0 (0: workers '
                      'only, all-reduce) and --num_workers >= 1' % (num_ps, num_workers))
  if num_data_workers < 0:
    raise ConfigError('--num_data_workers=%d must be >= 0 (0: no tf.data service)'
                      % num_data_workers)
  for flag, value, valid in (('isolation', isolation, ISOLATIONS),
                             ('addressing', addressing, ADDRESSINGS)):
    if value not in valid:
      raise ConfigError('--%s=%s is not known; valid: %s' % (flag, value, ', '.join(valid)))
  if not log_dir:
    raise ConfigError('--task_log_dir is required: the directory of the tasks\' logs')
  if not command:
    raise ConfigError('no command to run: give the command every task runs after --, '
                      'e.g. -- python my_trainer.py --flag=value')
  flags = ADDRESSING_FLAGS + ((SERVICE_FLAG,) if num_data_workers else ())
  owned = [a for a in command[1:] if a.startswith('-') and a.lstrip('-').split('=')[0] in flags]
  if owned:
    raise ConfigError('the launcher sets the cluster flags; remove %s from the command'
                      % ', '.join(owned))


class LocalCluster:
  """A ps/worker cluster of local processes; a context manager that kills them all.

  Args:
    num_ps, num_workers: task counts (>= 0 ps: 0 for workers that all-reduce; >= 1
      workers).
    command: the argv every task runs, without the cluster flags (the launcher appends
      them), e.g. [sys.executable, 'trainer.py', '--flag=value'].
    log_dir: where `<job>-<index>.log` go; created.
    isolation: 'auto' (private network namespace if possible), 'namespace' (required),
      'none' (ports open on all interfaces).
    addressing: 'flags' or 'tf_config' (worker 0 becomes TF_CONFIG's chief).
    cpu_affinity: optional {task name: [cpu, ...]} ('worker-0': [0]).
    env: extra environment variables for every task.
    num_data_workers: tf.data service data workers (and a dispatcher) started first.

  Raises:
    ConfigError: a setting no cluster can run with (the message names the flag).
  """

  def __init__(self, num_ps, num_workers, command, log_dir, isolation='auto',
               addressing='flags', cpu_affinity=None, env=None, num_data_workers=0):
    _check(num_ps, num_workers, command, log_dir, isolation, addressing, num_data_workers)
    os.makedirs(log_dir, exist_ok=True)
    self.command_line = list(command)
    self.log_dir = log_dir
    self.isolation, self.addressing = isolation, addressing
    self.cpu_affinity = dict(cpu_affinity or {})
    self.env = dict(env or {})
    self.network = None
    self.isolation_note = ''
    service = ((('dispatcher', 1), ('data_worker', num_data_workers))
               if num_data_workers else ())
    # The data service first: the trainers find it up when they build their input.
    self.tasks = [Task(job, i, portpicker.pick_unused_port(),
                       os.path.join(log_dir, '%s-%d.log' % (job, i)))
                  for job, count in service + (('ps', num_ps), ('worker', num_workers))
                  for i in range(count)]
    self._lost = set()  # Service tasks whose end was reported.

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

  @property
  def service_address(self):
    """host:port of the tf.data service's dispatcher, or None without one."""
    return next(iter(self.hosts('dispatcher')), None)

  def startup_line(self):
    ports = '; '.join('%s %s' % (job, ','.join(h.split(':')[1] for h in self.hosts(job)))
                      for job in ('ps', 'worker') + SERVICE_JOBS if self.hosts(job))
    addressing = ('+ %s--worker_hosts --job_name --task_index' % (
        '--ps_hosts ' if self.hosts('ps') else '') if self.addressing == 'flags' else
                  'with TF_CONFIG')
    if self.service_address:
      addressing += ' --%s=%s (a tf.data service dispatcher and %d data workers)' % (
          SERVICE_FLAG, self.service_address, len(self.hosts('data_worker')))
    size = ('%d ps + %d workers' % (len(self.hosts('ps')), len(self.hosts('worker')))
            if self.hosts('ps') else '%d workers without ps (all-reduce)'
            % len(self.hosts('worker')))
    return ('launch_local: %s on 127.0.0.1 (ports: %s), %s; each runs %s %s; logs: %s' % (
        size, ports, self.isolation_note, shlex.join(self.command_line), addressing,
        os.path.join(self.log_dir, '<job>-<index>.log')))

  def _service_command(self, task):
    """`python -m datasets.data_service` for a dispatcher or data worker task."""
    argv = [sys.executable, '-m', 'datasets.data_service', '--port=%d' % task.port]
    if task.job == 'dispatcher':
      return argv + ['--role=dispatcher',
                     '--work_dir=' + os.path.join(os.path.abspath(self.log_dir), 'data_service')]
    return argv + ['--role=worker', '--dispatcher_address=' + self.service_address,
                   '--worker_address=127.0.0.1:%d' % task.port]

  def command(self, task):
    """The argv of `task`: the command, plus its cluster flags unless TF_CONFIG (and the
    data service's address); a service task's own command."""
    if task.job in SERVICE_JOBS:
      argv = self._service_command(task)
      return self.network.wrap(argv) if self.network else argv
    argv = list(self.command_line)
    if self.service_address:
      argv.append('--%s=%s' % (SERVICE_FLAG, self.service_address))
    if self.addressing == 'flags':
      argv += ['--ps_hosts=' + ','.join(self.hosts('ps'))] if self.hosts('ps') else []
      argv += ['--worker_hosts=' + ','.join(self.hosts('worker')),
               '--job_name=' + task.job, '--task_index=%d' % task.index]
    return self.network.wrap(argv) if self.network else argv

  def _environment(self, task):
    env = dict(os.environ)
    env.pop('TF_CONFIG', None)
    env.update(self.env)
    if task.job in SERVICE_JOBS:
      env['PYTHONPATH'] = os.pathsep.join(filter(None, [_ROOT, env.get('PYTHONPATH')]))
    elif self.addressing == 'tf_config':
      workers = self.hosts('worker')
      cluster = {'chief': workers[:1], 'worker': workers[1:]}
      if self.hosts('ps'):
        cluster['ps'] = self.hosts('ps')
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
          self.command(task), env=self._environment(task), stdout=log,
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

  def training_tasks(self):
    return [t for t in self.tasks if t.job not in SERVICE_JOBS]

  def stop(self, grace_secs=30.0):
    """SIGTERM to workers, then to parameter servers, then to the data service's workers
    and dispatcher; SIGKILL after `grace_secs` each."""
    for job in ('worker', 'ps') + SERVICE_JOBS[::-1]:
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
    try:
      return self.start()
    except BaseException:  # A failed start (a task that cannot start) kills the others.
      self.kill()
      raise

  def __exit__(self, *exc_info):
    self.kill()

  def supervise(self, stop_requested, grace_secs=30.0, poll_secs=0.2):
    """Waits for the job; returns the launcher's exit status (see the module doc).

    `stop_requested()` is polled: when it turns true the cluster is stopped gracefully.
    """
    while True:
      self._watch_service()
      failed = [t for t in self.training_tasks() if t.returncode not in (None, 0)]
      if failed:
        first = failed[0]
        print('launch_local: %s exited with status %d; stopping the cluster (log: %s)' % (
            first.name, first.returncode, first.log_path), flush=True)
        self.stop(grace_secs)
        return self.chief.returncode or first.returncode
      if self.chief.returncode == 0:
        self._wait_all(self.training_tasks(), grace_secs)
        late = [t for t in self.running() if t.job not in SERVICE_JOBS]
        if late:
          print('launch_local: the chief finished; %s still running after %g s: killed' % (
              ', '.join(t.name for t in late), grace_secs), flush=True)
        for task in late:
          task.process.kill()
        self.stop(grace_secs)  # The data service ends with the job.
        return 0
      if stop_requested():
        print('launch_local: stopping the cluster (SIGTERM to workers, then any ps)',
              flush=True)
        self.stop(grace_secs)
        return self.chief.returncode or next(
            (t.returncode for t in self.tasks if t.returncode), 0)
      time.sleep(poll_secs)


  def _watch_service(self):
    """One line for each data service task that ended; training goes on without a data
    worker, and a dispatcher is restarted (its journal resumes the jobs)."""
    for task in self.tasks:
      if task.job not in SERVICE_JOBS or task.returncode is None or task.name in self._lost:
        continue
      if task.starts <= MAX_SERVICE_RESTARTS:
        print('launch_local: %s exited with status %d; restarting it on port %d%s (log: %s)'
              % ('the dispatcher' if task.job == 'dispatcher' else task.name, task.returncode,
                 task.port, ' with its journal' if task.job == 'dispatcher' else '',
                 task.log_path), flush=True)
        self.start_task(task.name)
        continue
      self._lost.add(task.name)
      print('launch_local: %s exited with status %d, restarted %d times already; training '
            'goes on without it to the end of the epoch (log: %s)' % (
                task.name, task.returncode, task.starts - 1, task.log_path), flush=True)


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


def launch(config, command):
  """Runs `command` as every task of a local cluster (a LaunchConfig says which) until
  the job ends; prints a start-up and a closing line.

  Returns:
    The chief's exit status, or the first failed task's (never 0 after a failure). A
    second SIGINT/SIGTERM kills every task and raises SystemExit(128 + its number).

  Raises:
    ConfigError: a setting no cluster can run with, an empty command or one that sets
      the cluster flags itself, or --isolation=namespace where no namespace can be made.
  """
  cluster = LocalCluster(config.num_ps, config.num_workers, command, config.task_log_dir,
                         isolation=config.isolation, addressing=config.addressing,
                         num_data_workers=config.num_data_workers)
  signals = _Signals(cluster)
  try:
    cluster.start()
    print(cluster.startup_line(), flush=True)
    status = cluster.supervise(lambda: signals.count > 0, config.stop_timeout_secs)
  except NamespaceUnavailable as error:
    raise ConfigError('--isolation=namespace: %s' % error) from None
  finally:
    cluster.kill()
  print('launch_local: done, status %d (%s; chief log: %s)' % (
      status, ', '.join('%s: %s' % (t.name, t.returncode) for t in cluster.tasks),
      cluster.chief.log_path), flush=True)
  return status
