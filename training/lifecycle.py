"""One training task from start to exit status: cluster resolution, signals, exit codes.

    job = resolve_job(config, os.environ)   # ConfigError on a mistake
    status = run_job(job)

`resolve_job` places the task in its cluster (`deployment.cluster.addressing`, --addressing: flags,
TF_CONFIG, a Slurm step or a JobSet pod) and fills the deployment fields of the config
from it (worker_replicas, num_ps_tasks, task), so the input shards, the DeploymentConfig
and the sync optimizer all follow the cluster. `run_job` runs a parameter server or a
worker (or the single process when there is no cluster) and turns every outcome into an
exit status:

(core/errors.py holds the one table every entry point uses; these are training's rows)

    0    finished; or stopped by SIGTERM/SIGINT (the chief saved a checkpoint first); or a
         parameter server whose workers have all left
    1    unexpected error (a bug): Python's traceback
    2    configuration mistake: one line `error: ...` (Kubeflow TFJob: permanent); also
         this task's port taken (deployment/cluster/preflight.py)
    3    damaged records: a shard that cannot be read (the line names it and the command
         that rebuilds it), or more videos with frames that do not decode than
         --max_damaged_fraction allows (a checkpoint was saved first); permanent
    6    train_dir could not be written (full disk, permission, read-only): one line naming
         the file, the reason and the last good checkpoint; temporary files removed
    138  the cluster failed around this task: a parameter server or peer died or does not
         answer, or a task never arrived (timeout). One line `error: ...`. Retryable:
         restarted, a worker rejoins and the chief resumes; also a host of the cluster
         that still does not resolve after --startup_timeout_secs (a peer pod not yet
         scheduled, or a wrong name) (Kubeflow TFJob ExitCode policy
         treats 138 as a user-defined retryable error)

SIGTERM and SIGINT stop the task at the next step boundary (`StopSignals`); a second one
ends it at once.
"""

import dataclasses
import functools
import os
import re
import signal
import sys
import threading
import time

from absl import logging

from deployment.cluster import addressing, peers, ps_cluster, task_spec
from tf_compat import tf
from core import errors
from core.params import ConfigError
from training.session_loop import EXIT_CLUSTER_FAILURE, flush_and_exit as exit_now
from training import write_failures
from training.train import train

__all__ = ['Job', 'resolve_job', 'run_job', 'StopSignals', 'exit_now', 'EXIT_OK',
           'EXIT_ERROR', 'EXIT_CONFIG', 'EXIT_CLUSTER_FAILURE']

# core/errors.py's table, under the names this module has always exported.
EXIT_OK = errors.OK
EXIT_ERROR = errors.BUG
EXIT_CONFIG = errors.USAGE

_TELLING = re.compile(r'connect|socket|recvmsg|sendmsg|reset|closed|unavailable|aborted|'
                      r'deadline|restarted', re.IGNORECASE)
# Errors that mean a peer (parameter server, chief) died, restarted or does not answer.
# FailedPrecondition: a restarted parameter server holds uninitialized variables.
PROBE_SECS = 3.0  # How long a worker without parameter servers waits for a peer's answer.
_CLUSTER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                   tf.errors.CancelledError, tf.errors.DeadlineExceededError,
                   tf.errors.FailedPreconditionError)


@dataclasses.dataclass(frozen=True)
class Job:
  """A resolved task: the config with its deployment fields set, and its cluster place."""
  config: object                 # training.config.TrainConfig
  task: object = None            # deployment.cluster.task_spec.TaskSpec, or None: a single process


def _check_against_cluster(config, task):
  """The legacy deployment flags may only repeat what the cluster says."""
  if config.master:
    raise ConfigError('--master=%s conflicts with the cluster (%s): a cluster task is its '
                      'own master; drop --master' % (config.master, task.source))
  pairs = (('worker_replicas', 1, task.num_workers, 'workers'),
           ('num_ps_tasks', 0, task.num_ps, 'parameter servers'))
  for name, default, value, what in pairs:
    given = getattr(config, name)
    if given not in (default, value):
      raise ConfigError('--%s=%d conflicts with the cluster, which has %d %s (%s); drop '
                        '--%s' % (name, given, value, what, task.source, name))
  expected = 0 if task.is_ps else task.task_index
  if config.task not in (0, expected):
    raise ConfigError('--task=%d conflicts with the cluster, where this task is %s %d (%s); '
                      'drop --task' % (config.task, task.job_name, task.task_index,
                                       task.source))


def resolve_job(config, environ=None):
  """Places `config` in its cluster, read from the flags or `environ` (a mapping like
  os.environ; None = empty) as --addressing says; returns a Job. Raises ConfigError."""
  host_flags = (config.ps_hosts, config.worker_hosts, config.job_name, config.task_index)
  try:
    task = addressing.find_task(config.addressing, host_flags, environ or {},
                                config.num_ps_tasks)
  except task_spec.ClusterError as error:
    raise ConfigError(str(error)) from None
  for name in ('recovery_wait_secs', 'startup_timeout_secs', 'step_timeout_secs',
               'stop_grace_secs'):
    if not getattr(config, name) >= 0:
      raise ConfigError('--%s=%r must be >= 0' % (name, getattr(config, name)))
  if task is None:
    return Job(config, None)
  _check_against_cluster(config, task)
  if task.is_ps:
    return Job(config, task)
  return Job(dataclasses.replace(config, worker_replicas=task.num_workers,
                                 num_ps_tasks=task.num_ps, task=task.task_index), task)


class StopSignals:
  """Context manager: SIGTERM and SIGINT set a `threading.Event` instead of killing.

  Python runs signal handlers only between bytecodes of the main thread, which may sit in
  a TensorFlow call for a long time; the C-level handler also writes the signal number
  to a wake-up pipe (`signal.set_wakeup_fd`), and a helper thread sets the event at once.
  A second signal ends the process immediately (status 128 + signal number).
  Outside the main thread it installs nothing and the event is never set.
  """

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.event = threading.Event()
    self._previous = {}
    self._pipe = None
    self._previous_fd = None

  def __enter__(self):
    if threading.current_thread() is not threading.main_thread():
      return self.event
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    self._pipe = (read_fd, write_fd)
    for signum in self.SIGNALS:
      self._previous[signum] = signal.signal(signum, lambda signum, frame: None)
    self._previous_fd = signal.set_wakeup_fd(write_fd)
    threading.Thread(target=self._watch, args=(read_fd,), name='stop-signals',
                     daemon=True).start()
    return self.event

  def _watch(self, read_fd):
    while True:
      try:
        data = os.read(read_fd, 1)
      except OSError:
        return
      if not data:
        return
      signum = data[0]
      if signum not in self.SIGNALS:
        continue
      name = signal.Signals(signum).name
      if self.event.is_set():
        print('%s again: exiting now' % name, file=sys.stderr, flush=True)
        os._exit(128 + signum)  # pylint: disable=protected-access
      logging.info('%s received: stopping at the next step boundary (again: exit now)',
                   name)
      self.event.set()

  def __exit__(self, *exc_info):
    if self._pipe is None:
      return
    signal.set_wakeup_fd(self._previous_fd)
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    os.close(self._pipe[1])  # Ends the helper thread (EOF).
    os.close(self._pipe[0])


def _cluster_failure_message(error, task, silent_tasks=None):
  """One line: the error type, the task it came from, and its most telling detail."""
  text = str(getattr(error, 'message', error))
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  telling = [line for line in lines if _TELLING.search(line)]
  detail = (telling or [line for line in lines if line != 'Graph execution error:']
            or [''])[0]
  where = task.name_of(text)
  if not task.num_ps:
    # Workers without parameter servers: a collective fails at once when a peer ends.
    if where and where.startswith('/job:worker/task:%d ' % task.task_index):
      where = None  # The error's own task, not the peer.
    silent = silent_tasks() if silent_tasks else ps_cluster.absent_tasks(task)
    gone = ', '.join('worker %d (%s)' % (index, host) for _, index, host in silent
                     if index != task.task_index)
    return ('lost the cluster (%s%s: %.160s): a worker died or does not answer%s; every step '
            'all-reduces every worker\'s gradients, so every task must restart: restart the '
            'job, it resumes from the chief\'s last checkpoint (docs/cluster.md)' % (
                type(error).__name__, ' from %s' % where if where else '', detail,
                '; not answering: %s' % gone if gone else ''))
  return ('lost the cluster (%s%s: %.160s): a parameter server or peer died or does not '
          'answer; restart the job (or the task): workers rejoin and the chief resumes '
          'from the parameter servers or its last checkpoint (docs/cluster.md)'
          % (type(error).__name__, ' from %s' % where if where else '', detail))


def _serve(job, server, stop_event):
  task = job.task
  logging.info('Parameter server %d serving %s; leaves when all %d workers have left',
               task.task_index, server.target, task.num_workers)
  left = ps_cluster.wait_for_workers_to_leave(task, server.target, stop_event,
                                              job.config.stop_grace_secs)
  if len(left) == task.num_workers:
    logging.info('All %d workers left: parameter server %d exits', task.num_workers,
                 task.task_index)
  else:
    logging.info('Stopped by a signal; workers %s had not left', sorted(
        set(range(task.num_workers)) - set(left)))
  return EXIT_OK


def _parameter_server_lost(index, host):
  message = ('lost the cluster: parameter server /job:ps/task:%d (%s) stopped answering; '
             'its variables are gone, so every worker must restart: restart the job (or '
             'the ps, then the workers); the chief resumes from its last checkpoint '
             '(docs/cluster.md)' % (index, host))
  print('error: %s' % message, file=sys.stderr)
  logging.info('Exiting with status %d: %s', EXIT_CLUSTER_FAILURE, message)
  exit_now(EXIT_CLUSTER_FAILURE)


def _counted(result, config):
  """'; N steps, N counted by the parameter servers[, M with a stale gradient dropped]'
  (deployment.worker_stats)."""
  if result.worker_steps is None:
    return ''
  stale = ''
  if config.sync_replicas:
    stale = ', %d with a stale gradient dropped' % result.stale_gradients
  return '; %d steps, %d counted by the parameter servers%s' % (
      result.local_steps, result.worker_steps, stale)


def _permanent(error, config):
  """Whether a worker's error ends it for good (status 2, 3 or 6: a configuration
  mistake, damaged data, a train_dir that cannot be written), so it tells the parameter
  servers it leaves, as a finished worker does: otherwise they would wait for it until
  killed. A cluster failure (138) is retried, and a restarted worker rejoins: it does
  not leave."""
  if isinstance(error, errors.EXPECTED):
    return True
  return (isinstance(error, write_failures.WRITE_ERRORS) and
          write_failures.describe_write_failure(error, config.train_dir) is not None)


def _train_in_cluster(job, server, stop_event):
  task = job.task
  config = dataclasses.replace(job.config, master=server.target)
  start = time.time()
  with ps_cluster.ParameterServerMonitor(task.ps_hosts, _parameter_server_lost):
    try:
      result = train(config, stop_event, _silent_tasks(task, server.target))
    except BaseException as error:
      if _permanent(error, config):
        logging.info('Worker %d leaves: failed (%s), for good: a restart would fail alike',
                     task.task_index, type(error).__name__)
        ps_cluster.announce_leaving(task, server.target, timeout_secs=max(1.0, min(
            10.0, job.config.stop_grace_secs)))
      raise
  logging.info('Worker %d leaves: %s at global step %s (%.1f examples/sec on this worker%s)',
               task.task_index, 'stopped' if stop_event.is_set() else 'finished',
               result.global_step, result.examples_per_sec or 0.0, _counted(result, config))
  ps_cluster.announce_leaving(task, server.target, timeout_secs=max(1.0, min(
      10.0, job.config.stop_grace_secs)))
  logging.info('Worker %d done after %.1f s', task.task_index, time.time() - start)
  return EXIT_OK


def _silent_tasks(task, target):
  """What the watchdog's time-out line names: the tasks that refuse a connection, and
  without parameter servers also the workers that accept one but do not answer (frozen:
  deployment.cluster.peers.unresponsive_workers)."""
  if task.num_ps:
    return functools.partial(ps_cluster.absent_tasks, task)
  return functools.partial(peers.unresponsive_workers, task, target, PROBE_SECS)


def _run(job, stop_event):
  if job.task is None:
    train(job.config, stop_event)
    return EXIT_OK
  try:
    # Names may appear late (Kubernetes pods): waited for within the start-up budget.
    config = job.config
    server = ps_cluster.start_server(
        job.task, config.startup_timeout_secs,
        cpu_devices=config.num_clones if config.clone_on_cpu else 1,
        nccl=config.variable_update == 'replicated' and not config.clone_on_cpu)
  except task_spec.NamesUnresolved as error:
    # A peer pod not scheduled yet is worth a retry (138), as a task that never arrives.
    errors.print_error(str(error))
    return EXIT_CLUSTER_FAILURE
  except task_spec.ClusterError as error:
    raise ConfigError(str(error)) from None
  logging.info('Cluster task: %s', job.task.describe())
  if job.task.is_ps:
    return _serve(job, server, stop_event)
  config, workers = job.config, job.task.num_workers
  if config.sync_replicas and config.replicas_to_aggregate < workers:
    logging.info('Synchronous with %d backup worker(s): each update waits for %d '
                 'gradients of its step and averages all that have arrived by then (one '
                 'per worker); later ones for that step are dropped',
                 workers - config.replicas_to_aggregate, config.replicas_to_aggregate)
  if job.task.num_ps:
    return _train_in_cluster(job, server, stop_event)
  try:
    return _train_in_cluster(job, server, stop_event)
  except _CLUSTER_ERRORS as error:  # Name the silent workers, frozen ones too.
    return _cluster_failed(job, error, _silent_tasks(job.task, server.target))


def run_job(job):
  """Runs the task under StopSignals; returns its exit status (see the module doc)."""
  write_failures.quiet_thread_write_errors()
  with StopSignals() as stop_event:
    try:
      return _run(job, stop_event)
    except errors.EXPECTED as error:
      return errors.report(error)
    except write_failures.WRITE_ERRORS as error:
      message = write_failures.describe_write_failure(error, job.config.train_dir)
      if message is None and not isinstance(error, _CLUSTER_ERRORS):
        raise
      if message is not None:
        errors.print_error(message)
        return errors.IO
      return _cluster_failed(job, error)
    except _CLUSTER_ERRORS as error:
      return _cluster_failed(job, error)


def _cluster_failed(job, error, silent_tasks=None):
  """EXIT_CLUSTER_FAILURE after one line; outside a cluster the error is a bug: raised.
  `silent_tasks()`: the tasks that do not answer, for a cluster without ps."""
  if job.task is None:
    raise error
  message = _cluster_failure_message(error, job.task, silent_tasks)
  print('error: %s' % message, file=sys.stderr)
  logging.info('Exiting with status %d: %s', EXIT_CLUSTER_FAILURE, message)
  return EXIT_CLUSTER_FAILURE
