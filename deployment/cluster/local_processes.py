"""A cluster on this host as processes: starting its tasks, signalling and stopping them.

`TaskProcesses(num_ps, num_workers, command, log_dir)` is a `ClusterLayout`
(deployment/cluster/local_layout.py: which tasks, where, running what) whose tasks it
starts, one process each, writing its log (appended to on a restart), in the launcher's
working directory and environment; a context manager that kills them all. Running a job
to its end is `LocalCluster.supervise` (deployment/cluster/launch_local.py).

TensorFlow's gRPC server listens on every interface and has no authentication, so the
tasks run in a private network namespace when this host allows one (`isolation='auto'`,
see deployment/cluster/netns.py): their ports then exist only inside it. If it does not,
the start-up line says that the ports are open on all interfaces.
"""

import ctypes
import functools
import os
import signal
import subprocess
import time

from core.params import ConfigError
from deployment.cluster.local_layout import SERVICE_JOBS, ClusterLayout
from deployment.cluster.netns import NamespaceUnavailable, PrivateNetwork

__all__ = ['TaskProcesses', 'ISOLATIONS']

ISOLATIONS = ('auto', 'namespace', 'none')
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _prepare_child(cores):
  """In the forked child: SIGTERM it when its parent dies; pin it to `cores`.

  Tasks run in sessions of their own (so a terminal's Ctrl-C reaches the launcher only);
  the parent-death signal keeps them from outliving a launcher killed with SIGKILL.
  """
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
  if cores:
    os.sched_setaffinity(0, cores)


class TaskProcesses(ClusterLayout):
  """The processes of a local cluster's tasks; a context manager that kills them all.

  Args:
    num_ps, num_workers, command, log_dir, addressing, num_data_workers: the layout
      (ClusterLayout: task counts, the argv every task runs without the cluster flags,
      where `<job>-<index>.log` go, 'flags' or 'tf_config', tf.data service data workers).
      log_dir is created.
    isolation: 'auto' (private network namespace if possible), 'namespace' (required),
      'none' (ports open on all interfaces).
    cpu_affinity: optional {task name: [cpu, ...]} ('worker-0': [0]).
    env: extra environment variables for every task.

  The signature is the one its callers (the launcher, benchmarks, tests) use; the six
  settings of the layout travel on as the ClusterLayout this is.

  Raises:
    ConfigError: a setting no cluster can run with (the message names the flag).
  """

  def __init__(self, num_ps, num_workers, command, log_dir, isolation='auto',
               addressing='flags', cpu_affinity=None, env=None, num_data_workers=0):
    super().__init__(num_ps, num_workers, command, log_dir, addressing, num_data_workers)
    if isolation not in ISOLATIONS:
      raise ConfigError('--isolation=%s is not known; valid: %s'
                        % (isolation, ', '.join(ISOLATIONS)))
    os.makedirs(log_dir, exist_ok=True)
    self.isolation = isolation
    self.cpu_affinity = dict(cpu_affinity or {})
    self.env = dict(env or {})
    self.network = None
    self.isolation_note = ''

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
    return self.describe(self.isolation_note)

  def command(self, task):
    """The argv `task` is started with (ClusterLayout.argv), inside the private network
    namespace when there is one."""
    argv = self.argv(task)
    return self.network.wrap(argv) if self.network else argv

  def _environment(self, task):
    env = dict(os.environ)
    env.pop('TF_CONFIG', None)
    env.update(self.env)
    return self.environment(task, env)

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
