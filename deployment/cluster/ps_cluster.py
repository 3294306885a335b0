"""A cluster task's server and the few cluster-wide ops.

Which task a process is comes from deployment/cluster/task_spec.py (`TaskSpec`, from
flags or TF_CONFIG) and, by --addressing, deployment/cluster/addressing.py (a scheduler's
environment). This module takes that task:
  * `start_server`: its gRPC server, once the cluster's names resolve and its port is free.
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

import os
import threading
import time

from absl import logging

from deployment.cluster import peers, preflight
from deployment.cluster.peers import answers
# Re-exported (the redundant alias says so): training.lifecycle and the tests call
# ps_cluster.absent_tasks.
from deployment.cluster.peers import absent_tasks as absent_tasks
from deployment.cluster.task_spec import ClusterError, NamesUnresolved
from tf_compat import tf

__all__ = ['device_filters', 'start_server', 'announce_leaving', 'wait_for_workers_to_leave',
           'ParameterServerMonitor', 'server_inter_op_threads']

_LEAVING_QUEUE = 'slimdeploy_leaving_ps%d'


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
