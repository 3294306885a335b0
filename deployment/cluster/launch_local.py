"""Running one job on a whole parameter-server cluster on this host, one process per task:
the work of `python -m deployment.launch_local`.

`LocalCluster(num_ps, num_workers, command, log_dir)` is the cluster: its layout (which
tasks, on which ports, running what: deployment/cluster/local_layout.py) and its processes
(deployment/cluster/local_processes.py), with `supervise`, which runs a job to its end. A
dispatcher or data worker of the tf.data service that ends is restarted on its port (the
dispatcher with its journal), up to MAX_SERVICE_RESTARTS times each: every epoch is a job
of the dispatcher that gives each data worker it ever had a share, so the end of an epoch
waits for a lost data worker to come back at its address. Past that it is one line and
training goes on to the epoch's end; the trainer's watchdog then ends the job (138, naming
the data worker it waits for).

`launch(config, command)` runs one job to its end: it forwards Ctrl-C and SIGTERM (workers
first, then parameter servers, which would also leave on their own, then the data
service), stops every process it started when any training task fails or when it ends,
and returns the chief's status, or the status of the first task that failed (a failure is
never reported as success). A second Ctrl-C kills at once.
"""

import dataclasses
import os
import signal
import sys
import time
from typing import Optional

from core.params import ConfigError, param
from deployment.cluster.local_layout import (ADDRESSING_FLAGS, SERVICE_FLAG, SERVICE_JOBS,
                                             Task)
from deployment.cluster.local_processes import ISOLATIONS, TaskProcesses
from deployment.cluster.netns import NamespaceUnavailable

__all__ = ['LaunchConfig', 'launch', 'LocalCluster', 'Task', 'ADDRESSING_FLAGS',
           'SERVICE_FLAG', 'ISOLATIONS', 'DEFAULT_LOG_DIR', 'MAX_SERVICE_RESTARTS']

DEFAULT_LOG_DIR = os.path.join('runs', 'launch_local')
MAX_SERVICE_RESTARTS = 3


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


class LocalCluster(TaskProcesses):
  """A ps/worker cluster of local processes (TaskProcesses, whose arguments it takes)
  that runs a job to its end (`supervise`); a context manager that kills them all."""

  def supervise(self, stop_requested, grace_secs=30.0, poll_secs=0.2):
    """Waits for the job; returns the launcher's exit status (see the module doc).

    `stop_requested()` is polled: when it turns true the cluster is stopped gracefully.
    """
    lost = set()  # Service tasks whose end was reported.
    while True:
      self._watch_service(lost)
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

  def _watch_service(self, lost):
    """One line for each data service task that ended; training goes on without a data
    worker, and a dispatcher is restarted (its journal resumes the jobs)."""
    for task in self.tasks:
      if task.job not in SERVICE_JOBS or task.returncode is None or task.name in lost:
        continue
      if task.starts <= MAX_SERVICE_RESTARTS:
        print('launch_local: %s exited with status %d; restarting it on port %d%s (log: %s)'
              % ('the dispatcher' if task.job == 'dispatcher' else task.name, task.returncode,
                 task.port, ' with its journal' if task.job == 'dispatcher' else '',
                 task.log_path), flush=True)
        self.start_task(task.name)
        continue
      lost.add(task.name)
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
