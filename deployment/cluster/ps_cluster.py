"""Which parameter-server cluster a process belongs to, and the few cluster-wide ops.

A cluster has two jobs: `ps` (parameter servers, holding the variables) and `worker`
(training replicas; worker 0 is the chief, the only task that writes checkpoints and
summaries); a cluster of workers only all-reduces (deployment/cluster/peers.py). A task
learns its place from the legacy flags

    --ps_hosts=h1:2222 --worker_hosts=h2:2222,h3:2222 --job_name=worker --task_index=1

or from the TF_CONFIG environment variable that Kubeflow's TFJob operator and most
schedulers set. TF_CONFIG's separate `chief` (or `master`) task is folded in as worker 0
and the workers shift up by one, so every task computes the same cluster; an `evaluator`
entry is dropped (it does not train). `resolve_task` returns a `TaskSpec`, or None when
neither describes a cluster (a single process). `find_task` adds the trainer's
--addressing: the registry ADDRESSINGS of environments a scheduler sets (TF_CONFIG,
Slurm's srun step in deployment/cluster/slurm_env.py, a JobSet pod), each found by itself
under --addressing=auto (deployment/cluster/jobset_env.py reads a JobSet pod's).

Mistakes raise `ClusterError` (a ValueError) with one line naming the flag (or TF_CONFIG
key), the bad value and what would be accepted.

Cluster-wide ops:
  * `device_filters`: the devices a task's sessions may talk to (its own task and the
    parameter servers), so a worker never waits for the other workers to answer.
  * `absent_tasks` (deployment/cluster/peers.py): the tasks that refuse a connection.
  * `ParameterServerMonitor`: a worker's steps do not fail when a parameter server dies,
    they wait for it (gRPC waits for the address to answer again); the monitor notices
    within seconds that a parameter server it has seen stopped accepting connections.
  * The leaving queue: one shared FIFO queue per parameter server. Each worker puts its
    index there when it leaves (finished or stopped); a parameter server waits for every
    worker index instead of blocking in `server.join()` forever (tensorflow#4713).

This module knows cluster addresses and devices only: nothing about data or models.
"""

import dataclasses
import json
import os
import re
import threading
import time

from absl import logging

from deployment.cluster import peers, preflight
from deployment.cluster.peers import absent_tasks, answers  # pylint: disable=unused-import
from tf_compat import tf

__all__ = ['ClusterError', 'TaskSpec', 'resolve_task', 'task_from_flags',
           'task_from_tf_config', 'find_task', 'register_addressing', 'ADDRESSINGS',
           'ADDRESSING_CHOICES', 'device_filters', 'start_server', 'announce_leaving',
           'wait_for_workers_to_leave', 'ParameterServerMonitor', 'server_inter_op_threads']

JOBS = ('ps', 'worker')
_LEAVING_QUEUE = 'slimdeploy_leaving_ps%d'
_HOST_PORT = re.compile(r'^[^\s:/,]+:(\d+)$|^\[[0-9a-fA-F:.]+\]:(\d+)$')


class ClusterError(ValueError):
  """A cluster description that cannot work; the message is one line."""


class NamesUnresolved(ClusterError):
  """Host names of the cluster still unresolved after the wait: a peer pod not yet
  scheduled, or a wrong name. Retryable, unlike a mistake in the description."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """One task of a ps/worker cluster. Worker 0 is the chief."""
  ps_hosts: tuple
  worker_hosts: tuple
  job_name: str
  task_index: int
  source: str = 'flags'   # 'flags', 'TF_CONFIG', 'Slurm job N', for messages

  num_ps = property(lambda self: len(self.ps_hosts))
  num_workers = property(lambda self: len(self.worker_hosts))
  is_ps = property(lambda self: self.job_name == 'ps')
  is_chief = property(lambda self: self.job_name == 'worker' and self.task_index == 0)

  @property
  def address(self):
    hosts = self.ps_hosts if self.is_ps else self.worker_hosts
    return hosts[self.task_index]

  def cluster_spec(self):
    jobs = (('ps', self.ps_hosts), ('worker', self.worker_hosts))
    return tf.train.ClusterSpec({job: list(hosts) for job, hosts in jobs if hosts})

  def describe(self):
    """'worker 1 of 2 at h:p; cluster of 1 ps + 2 workers from flags', for start-up lines
    and error messages ('... cluster of 2 workers without ps (all-reduce) ...')."""
    count = self.num_ps if self.is_ps else self.num_workers
    role = ' (chief)' if self.is_chief else ''
    size = ('%d ps + %d workers' % (self.num_ps, self.num_workers) if self.num_ps else
            '%d workers without ps (all-reduce)' % self.num_workers)
    return '%s %d of %d%s at %s; cluster of %s from %s' % (
        self.job_name, self.task_index, count, role, self.address, size, self.source)

  def name_of(self, device):
    """'/job:ps/replica:0/task:1/...' -> '/job:ps/task:1 (h:p)'; None if not a task."""
    match = re.search(r'/job:(ps|worker)(?:/replica:\d+)?/task:(\d+)', device or '')
    if not match:
      return None
    hosts = self.ps_hosts if match.group(1) == 'ps' else self.worker_hosts
    index = int(match.group(2))
    where = ' (%s)' % hosts[index] if index < len(hosts) else ''
    return '/job:%s/task:%d%s' % (match.group(1), index, where)


def _check_hosts(name, hosts):
  for host in hosts:
    if not _HOST_PORT.match(host):
      raise ClusterError('%s: %r is not host:port (e.g. 10.0.0.1:2222)' % (name, host))
    port = int(host.rsplit(':', 1)[1])
    if not 0 < port < 65536:
      raise ClusterError('%s: %r has port %d, not in 1..65535' % (name, host, port))
  duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
  if duplicates:
    raise ClusterError('%s lists %s more than once' % (name, ', '.join(duplicates)))


def _check_task(task, ps_name, worker_name, job_flag, index_flag):
  if task.job_name not in JOBS:
    raise ClusterError('%s=%s is not a training job; valid: %s'
                       % (job_flag, task.job_name, ', '.join(JOBS)))
  if not task.worker_hosts:
    raise ClusterError('%s is empty: a cluster needs at least one worker (the chief)'
                       % worker_name)
  if task.is_ps and not task.ps_hosts:
    raise ClusterError('%s=ps but %s is empty: a cluster without parameter servers has '
                       'workers only' % (job_flag, ps_name))
  _check_hosts(ps_name, list(task.ps_hosts))
  _check_hosts(worker_name, list(task.worker_hosts))
  overlap = sorted(set(task.ps_hosts) & set(task.worker_hosts))
  if overlap:
    raise ClusterError('%s and %s both list %s: every task needs its own host:port'
                       % (ps_name, worker_name, ', '.join(overlap)))
  count = task.num_ps if task.is_ps else task.num_workers
  if not 0 <= task.task_index < count:
    raise ClusterError('%s=%d is out of range: %s lists %d %s task(s), valid: 0..%d'
                       % (index_flag, task.task_index, ps_name if task.is_ps else
                          worker_name, count, task.job_name, count - 1))
  return task


def task_from_flags(ps_hosts, worker_hosts, job_name, task_index):
  """The task named by the legacy flags, or None when none of them is set.

  Args:
    ps_hosts, worker_hosts: sequences of 'host:port' (absl list flags).
    job_name: 'ps' or 'worker' (None or '' when unset).
    task_index: index within the job.
  """
  ps_hosts, worker_hosts = tuple(ps_hosts or ()), tuple(worker_hosts or ())
  if not (ps_hosts or worker_hosts or job_name):
    return None
  if not job_name:
    raise ClusterError('--job_name is required with --ps_hosts/--worker_hosts; valid: %s'
                       % ', '.join(JOBS))
  task = TaskSpec(ps_hosts, worker_hosts, job_name, int(task_index), 'flags')
  return _check_task(task, '--ps_hosts', '--worker_hosts', '--job_name', '--task_index')


def _tf_config_hosts(cluster, key):
  hosts = cluster.get(key, [])
  if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
    raise ClusterError('TF_CONFIG cluster.%s must be a list of "host:port" strings, got %r'
                       % (key, hosts))
  return hosts


def _parse_tf_config(text):
  try:
    value = json.loads(text)
  except ValueError as error:
    raise ClusterError('TF_CONFIG is not valid JSON (%s): %.80s' % (error, text)) from None
  if not isinstance(value, dict) or not isinstance(value.get('cluster'), dict):
    raise ClusterError('TF_CONFIG has no "cluster" object: %.80s' % text)
  task = value.get('task')
  if not isinstance(task, dict) or 'type' not in task:
    raise ClusterError('TF_CONFIG has no "task": {"type": ..., "index": ...}: %.80s' % text)
  return value['cluster'], task


def task_from_tf_config(text):
  """The task described by a TF_CONFIG JSON string, or None for an empty one."""
  if not text or not text.strip():
    return None
  cluster, task = _parse_tf_config(text)
  unknown = sorted(set(cluster) - {'chief', 'master', 'worker', 'ps', 'evaluator'})
  if unknown:
    raise ClusterError('TF_CONFIG cluster has unknown job(s) %s; valid: chief (or master), '
                       'worker, ps, evaluator' % ', '.join(unknown))
  chiefs = _tf_config_hosts(cluster, 'chief') + _tf_config_hosts(cluster, 'master')
  if len(chiefs) > 1:
    raise ClusterError('TF_CONFIG lists %d chief/master tasks (%s); at most one'
                       % (len(chiefs), ', '.join(chiefs)))
  workers = tuple(chiefs + _tf_config_hosts(cluster, 'worker'))
  kind, index = task.get('type'), task.get('index', 0)
  if not isinstance(index, int) or isinstance(index, bool):
    raise ClusterError('TF_CONFIG task.index=%r must be an integer' % (index,))
  if kind == 'evaluator':
    raise ClusterError('TF_CONFIG task.type=evaluator does not train: run eval.py with '
                       '--checkpoint_path on the chief\'s train_dir instead')
  if kind in ('chief', 'master'):
    job_name, task_index = 'worker', index
  elif kind == 'worker':
    job_name, task_index = 'worker', index + len(chiefs)
  elif kind == 'ps':
    job_name, task_index = 'ps', index
  else:
    raise ClusterError('TF_CONFIG task.type=%r is not known; valid: chief, master, worker, '
                       'ps' % (kind,))
  spec = TaskSpec(tuple(_tf_config_hosts(cluster, 'ps')), workers, job_name, task_index,
                  'TF_CONFIG')
  return _check_task(spec, 'TF_CONFIG cluster.ps', 'TF_CONFIG cluster.chief+worker',
                     'TF_CONFIG task.type', 'TF_CONFIG task.index')


def resolve_task(ps_hosts=(), worker_hosts=(), job_name=None, task_index=0, tf_config=None):
  """The TaskSpec from the flags or from TF_CONFIG (not both), or None for no cluster."""
  if (ps_hosts or worker_hosts or job_name) and tf_config and tf_config.strip():
    raise ClusterError('both --ps_hosts/--worker_hosts/--job_name and TF_CONFIG describe a '
                       'cluster; use one (unset TF_CONFIG or drop the flags)')
  from_flags = task_from_flags(ps_hosts, worker_hosts, job_name, task_index)
  from_env = task_from_tf_config(tf_config)
  if not from_flags and task_index:
    if not from_env:
      raise ClusterError('--task_index=%d needs --ps_hosts, --worker_hosts and --job_name '
                         '(or TF_CONFIG)' % task_index)
    raise ClusterError('--task_index=%d conflicts with TF_CONFIG, which gives the task '
                       'index; drop --task_index' % task_index)
  return from_flags or from_env


# --addressing: where a task finds its place. 'flags' reads --ps_hosts/--worker_hosts/
# --job_name/--task_index; each entry of ADDRESSINGS reads one environment, its `find`
# returning the TaskSpec, or None when that environment is absent; 'auto' takes the
# flags or TF_CONFIG (deliberate choices) first, then a scheduler's environment (ambient:
# every process of a Slurm job has one).
@dataclasses.dataclass(frozen=True)
class Addressing:
  find: object   # (environ mapping, num_ps from --num_ps_tasks) -> TaskSpec or None
  needs: str     # what must be set, for the error when it was asked for and is absent


ADDRESSINGS = {}


def register_addressing(name, find, needs):
  """Adds an environment source `--addressing=name`; refuses a name twice."""
  if name in ADDRESSINGS or name in ('auto', 'flags'):
    raise ValueError('addressing %r is already registered' % name)
  ADDRESSINGS[name] = Addressing(find, needs)


def _slurm(environ, num_ps):
  from deployment.cluster import slurm_env  # pylint: disable=import-outside-toplevel  (a cycle)
  return slurm_env.task_from_environ(environ, num_ps)


def _jobset(environ, num_ps):  # pylint: disable=unused-argument  (the pod's env gives P)
  from deployment.cluster import jobset_env  # pylint: disable=import-outside-toplevel  (a cycle)
  return jobset_env.task_from_environ(environ)


register_addressing('tf_config', lambda environ, num_ps: task_from_tf_config(
    environ.get('TF_CONFIG')), 'TF_CONFIG')
register_addressing('slurm', _slurm, 'a task of an srun step of P + W tasks (SLURM_STEP_ID, '
                    'SLURM_PROCID) with --num_ps_tasks=P')
register_addressing('jobset', _jobset, 'a JobSet pod (JOBSET_NAME)')
ADDRESSING_CHOICES = ('auto', 'flags') + tuple(ADDRESSINGS)


def find_task(addressing, host_flags, environ, num_ps=0):
  """The TaskSpec from the source `addressing` names, or None for a single process.

  Args:
    addressing: one of ADDRESSING_CHOICES (--addressing).
    host_flags: (ps_hosts, worker_hosts, job_name, task_index), the legacy flags.
    environ: a mapping like os.environ.
    num_ps: --num_ps_tasks (Slurm's step does not say how many of its tasks are ps).
  """
  if addressing == 'auto':
    task = resolve_task(*host_flags, tf_config=environ.get('TF_CONFIG'))
    for name in ('slurm', 'jobset'):
      task = task or ADDRESSINGS[name].find(environ, num_ps)
    return task
  if addressing == 'flags':
    task = task_from_flags(*host_flags)
    if task is None:
      raise ClusterError('--addressing=flags needs --ps_hosts, --worker_hosts and --job_name')
    return task
  if addressing not in ADDRESSINGS:
    raise ClusterError('--addressing=%s is not known; valid: %s'
                       % (addressing, ', '.join(ADDRESSING_CHOICES)))
  if any(host_flags):
    raise ClusterError('--addressing=%s reads the cluster from the environment; drop '
                       '--ps_hosts/--worker_hosts/--job_name/--task_index' % addressing)
  task = ADDRESSINGS[addressing].find(environ, num_ps)
  if task is None:
    raise ClusterError('--addressing=%s found no cluster: it needs %s'
                       % (addressing, ADDRESSINGS[addressing].needs))
  return task


def device_filters(deploy_config):
  """Devices a worker's sessions may reach: the ps job and its own task; without ps tasks
  its own task only (several workers all-reducing), or [] for a single process.

  Without filters a worker's session waits for every worker of the cluster to answer,
  so one missing worker stalls all others at start-up (tensorflow#13337, #16611).
  """
  return peers.session_device_filters(deploy_config)


def start_server(task, names_timeout_secs=0.0, cpu_devices=1, nccl=False):
  """Starts this task's gRPC server; returns the `tf.distribute.Server`.

  TensorFlow binds every interface ('0.0.0.0', shown by `ss -ltn` as `*:port`) whatever
  host the cluster gives, and the runtime has no authentication: keep clusters on a
  private network (docs/cluster.md); `deployment.launch_local` isolates its tasks.
  Its ConfigProto is peers.server_config's: device filters, and without ps tasks the
  collective group leader (worker 0), which the collectives need in the *server's* config.
  First every host name of the cluster must resolve, waited for up to
  `names_timeout_secs` (0 = forever: a Kubernetes pod's name appears after it starts),
  else NamesUnresolved; and this task's port must be free, else ClusterError; one line
  naming the task. A worker's server gets `cpu_devices` logical CPU devices (clones on
  CPUs), and with `nccl` NCCL for its collectives (replicated clones on GPUs).
  """
  unresolved = preflight.wait_for_names(task, names_timeout_secs)
  if unresolved:
    more = len(unresolved) - 1
    raise NamesUnresolved('%s%s' % (unresolved[0], ' (and %d more host(s) of the cluster)'
                                 % more if more else ''))
  taken = preflight.own_port_problem(task)
  if taken:
    raise ClusterError(taken)
  return tf.train.Server(task.cluster_spec(), job_name=task.job_name,
                         task_index=task.task_index, start=True,
                         config=peers.server_config(task, server_inter_op_threads(),
                                                    cpu_devices, nccl))


def server_inter_op_threads(environ=os.environ, cores=None):
  """Inter-op threads of a task's server: 2 where TensorFlow would take 1, else 0
  (TensorFlow's choice: one per core it may run on; TF_NUM_INTEROP_THREADS wins).

  A task that may run on one core only (pinned, or a one-core cpuset) gets one inter-op
  thread, and TensorFlow's executor then runs a chain of expensive ops inline and queues
  every other ready op behind it: in a training step the gradient of the largest layer
  (cifarnet's fc3, 6 MB of its 7) waits for the whole backward pass of the conv layers
  before it is summed and sent, so its transfer and the parameter server's accumulation
  land after the step's compute instead of during it, on the synchronous critical path.
  With a second thread that gradient leaves while the backward pass goes on
  (docs/benchmarks.md, synchronous scaling).
  """
  if environ.get('TF_NUM_INTEROP_THREADS'):
    return 0
  cores = len(os.sched_getaffinity(0)) if cores is None else cores
  return 2 if cores < 2 else 0


def _leaving_queue(ps_index, num_workers):
  with tf.device('/job:ps/task:%d/device:CPU:0' % ps_index):
    return tf.queue.FIFOQueue(4 * num_workers, [tf.int32], shapes=[[]],
                              shared_name=_LEAVING_QUEUE % ps_index,
                              name='leaving_queue_ps%d' % ps_index)


def announce_leaving(task, target, timeout_secs=10.0):
  """Worker side: tells every parameter server this worker leaves. Never raises.

  Returns the number of parameter servers reached (those already gone are skipped; 0
  at once in a cluster without ps).
  """
  reached = 0
  if not task.num_ps:
    return reached
  with tf.Graph().as_default():
    enqueues = [_leaving_queue(i, task.num_workers).enqueue(task.task_index)
                for i in range(task.num_ps)]
    config = tf.ConfigProto(device_filters=['/job:ps'])
    options = tf.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    try:
      with tf.Session(target, config=config) as sess:
        for i, enqueue in enumerate(enqueues):
          try:
            sess.run(enqueue, options=options)
            reached += 1
          except tf.errors.OpError as error:
            logging.warning('Could not tell /job:ps/task:%d that this worker leaves: %s',
                            i, str(error).splitlines()[0])
    except tf.errors.OpError as error:
      logging.warning('Could not tell the parameter servers that this worker leaves: %s',
                      str(error).splitlines()[0])
  return reached


def wait_for_workers_to_leave(task, target, stop_event, stop_grace_secs, poll_secs=0.5,
                              linger_secs=1.0):
  """Parameter-server side: returns once every worker has left.

  Also returns `stop_grace_secs` after `stop_event` is set (SIGTERM) even if some worker
  has not left, so a stopping chief can still save its last checkpoint.

  Returns:
    The sorted list of worker indices that left.
  """
  left = set()
  stop_seen = None
  with tf.Graph().as_default():
    queue = _leaving_queue(task.task_index, task.num_workers)
    size, dequeue = queue.size(), queue.dequeue()
    config = tf.ConfigProto(device_filters=['/job:ps/task:%d' % task.task_index])
    with tf.Session(target, config=config) as sess:
      while len(left) < task.num_workers:
        if stop_event.is_set():
          stop_seen = stop_seen or time.time()
          if time.time() - stop_seen >= stop_grace_secs:
            break
        # Dequeue only what is there (this loop is the queue's one reader): a dequeue
        # under a deadline can take an index and then fail its step, and lose it.
        if not sess.run(size):
          time.sleep(poll_secs)
          continue
        index = int(sess.run(dequeue))
        if index not in left:
          left.add(index)
          logging.info('Worker %d left (%d of %d)', index, len(left), task.num_workers)
  # The last worker is still closing the session it told us through, which sends this
  # server a clean-up call: answer it before leaving.
  time.sleep(linger_secs)
  return sorted(left)


class ParameterServerMonitor:
  """Calls `on_lost(index, host)` once a parameter server seen alive stops answering.

  A background thread opens a TCP connection to every parameter server each
  `interval_secs`. A server that accepted once and then refuses (or times out) for
  `lost_after_secs` in a row is lost: its state is gone even if it comes back, so the
  worker must restart. Servers not yet seen alive are left to the start-up timeout.
  Use as a context manager around training.
  """

  def __init__(self, ps_hosts, on_lost, interval_secs=1.0, lost_after_secs=4.0):
    self._hosts = list(ps_hosts)
    self._on_lost = on_lost
    self._interval = interval_secs
    self._lost_after = lost_after_secs
    self._done = threading.Event()
    self._thread = threading.Thread(target=self._watch, name='ps-monitor', daemon=True)

  def _watch(self):
    seen, failing_since = set(), {}
    while not self._done.wait(self._interval):
      for index, host in enumerate(self._hosts):
        if answers(host, self._interval):
          seen.add(index)
          failing_since.pop(index, None)
        elif index in seen:
          since = failing_since.setdefault(index, time.monotonic())
          if time.monotonic() - since >= self._lost_after and not self._done.is_set():
            self._on_lost(index, host)
            return

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc_info):
    self._done.set()
    self._thread.join()
