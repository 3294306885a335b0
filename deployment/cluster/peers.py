"""Clusters of workers without parameter servers (all-reduce): their servers' settings and
the probe that names a worker gone silent.

Without ps tasks every worker keeps its variables on its own devices and the workers'
clones all-reduce their gradients with collective ops (CollectiveReduce over gRPC). Two
settings make that work, both in the ConfigProto given to the *server* (`server_config`):
the collective group leader, worker 0 (without it every worker hangs at the first
collective), and device filters to the task's own devices, so no session waits for the
other workers to answer. A killed peer fails a collective at once; a frozen one (SIGSTOP)
still accepts TCP connections (`absent_tasks`, the tasks that refuse one, tells only a
task gone from one never started), so `unresponsive_workers` asks every other worker for
a tiny step under a deadline. docs/cluster.md, "Workers without parameter servers".

Takes a task_spec.TaskSpec (or anything with its fields); imports nothing of the project.
"""

import socket
import threading
import time

from tf_compat import tf

__all__ = ['COLLECTIVE_LEADER', 'server_config', 'session_device_filters',
           'unresponsive_workers', 'absent_tasks', 'answers']

# Where every collective group of a worker-only cluster is resolved: worker 0, the chief.
COLLECTIVE_LEADER = '/job:worker/replica:0/task:0'


def server_config(task, inter_op_threads=0, cpu_devices=1, nccl=False):
  """The ConfigProto of `task`'s server (ps_cluster.start_server).

  A ps task reaches only itself; a worker beside ps tasks the ps job and itself; a worker
  of a cluster without ps only itself, and it names the collective group leader. A
  worker's server has `cpu_devices` logical CPU devices (clones on CPUs: one each; the
  server's devices are what its sessions see, whatever their own config says); with
  `nccl` (replicated clones on GPUs) its collectives use NCCL (`collective_nccl`).
  """
  if task.job_name == 'ps':
    filters = ['/job:ps/task:%d' % task.task_index]
  elif task.ps_hosts:
    filters = ['/job:ps', '/job:worker/task:%d' % task.task_index]
  else:
    filters = ['/job:worker/task:%d' % task.task_index]
  config = tf.ConfigProto(device_filters=filters,
                          inter_op_parallelism_threads=inter_op_threads)
  if task.job_name != 'ps' and cpu_devices > 1:
    config.device_count['CPU'] = cpu_devices
  if task.job_name != 'ps' and nccl:
    config.experimental.collective_nccl = True
  if not task.ps_hosts:
    config.experimental.collective_group_leader = COLLECTIVE_LEADER
  return config


def session_device_filters(deploy_config):
  """The device filters of a worker's training session (ps_cluster.device_filters).

  With ps tasks: the ps job and its own task. Without, in a cluster of several workers:
  its own task only (the collectives reach the others without the session). A single
  process: [] (no filter).
  """
  own = '%s/task:%d' % (deploy_config.worker_device or '/job:worker', deploy_config.replica_id)
  if deploy_config.num_ps_tasks:
    return [deploy_config.ps_device, own]
  return [own] if deploy_config.num_replicas > 1 else []


def answers(host, timeout_secs):
  """Whether 'name:port' accepts a TCP connection within `timeout_secs`."""
  name, port = host.rsplit(':', 1)
  try:
    with socket.create_connection((name.strip('[]'), int(port)), timeout=timeout_secs):
      return True
  except OSError:
    return False


def absent_tasks(task, timeout_secs=1.0):
  """[(job, index, host)] of the other tasks of `task`'s cluster that do not accept a
  connection: never started, ended, or unreachable. A task's gRPC server listens from
  its start to its exit, so this tells a missing task from a slow one."""
  return [(job, index, host)
          for job, hosts in (('ps', task.ps_hosts), ('worker', task.worker_hosts))
          for index, host in enumerate(hosts)
          if (job, index) != (task.job_name, task.task_index)
          and not answers(host, timeout_secs)]


def _answers_a_step(target, index, timeout_secs):
  """Whether /job:worker/task:`index` runs one tiny op within `timeout_secs`, through the
  master at `target` (a fresh graph and session, filtered to that task)."""
  device = '/job:worker/task:%d' % index
  with tf.Graph().as_default():
    with tf.device(device + '/device:CPU:0'):
      probe = tf.identity(tf.constant(index, tf.int32), name='peer_probe')
    config = tf.ConfigProto(device_filters=[device],
                            operation_timeout_in_ms=int(timeout_secs * 1000))
    options = tf.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    try:
      with tf.Session(target, config=config) as sess:
        return sess.run(probe, options=options) == index
    except tf.errors.OpError:
      return False


def unresponsive_workers(task, target, timeout_secs=5.0):
  """[(job, index, host)] of the other workers of `task`'s cluster that do not run a tiny
  step on their CPU within `timeout_secs`: ended, unreachable, or frozen (a SIGSTOPped
  process still accepts TCP connections, so a connection is not an answer).

  Args:
    task: this process's TaskSpec (its own worker is never probed).
    target: this task's server target ('grpc://host:port', `server.target`).
    timeout_secs: the deadline of each probe; the workers are asked in parallel, so the
      whole call takes about that long at most.

  Returns:
    The silent workers in index order; [] when all answer (or there is no other worker).
  """
  others = [i for i in range(len(task.worker_hosts))
            if (task.job_name, task.task_index) != ('worker', i)]
  answered = {}

  def ask(index):
    answered[index] = _answers_a_step(target, index, timeout_secs)

  threads = [threading.Thread(target=ask, args=(i,), name='probe-worker-%d' % i, daemon=True)
             for i in others]
  for thread in threads:
    thread.start()
  # Creating a session waits without a deadline for a frozen task to list its devices:
  # its thread stays blocked (a daemon) until the task answers or this process ends.
  deadline = time.monotonic() + timeout_secs + 0.25
  for thread in threads:
    thread.join(max(0.0, deadline - time.monotonic()))
  return [('worker', i, task.worker_hosts[i]) for i in others if not answered.get(i)]
