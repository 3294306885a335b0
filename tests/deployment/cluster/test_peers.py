"""deployment/cluster/peers.py: the servers of a cluster of workers without ps (the
collective group leader and device filters in the server's config: a real all-reduce
between this process's server and two worker processes on 127.0.0.1), and the probe
that then names the one of them killed and the one frozen."""

import functools
import os
import signal
import subprocess
import time
import types

import pytest

from deployment.cluster import peers, ps_cluster, task_spec
from deployment.cluster.process_guards import die_with_parent
from deployment.cluster.task_spec import TaskSpec
from tests.cluster_tasks import ROOT, all_reduce, free_ports, serve_command

pytestmark = pytest.mark.cluster
START_SECS = 60   # A fresh start takes about 5 s, 20 on a loaded machine.


def loopback_workers(count):
  return tuple('127.0.0.1:%d' % port for port in free_ports(count))


def start(hosts, index, log_dir, all_reduce_first=False):
  """A worker process (tests.cluster_tasks.serve_worker), dying with this one."""
  log = open(os.path.join(str(log_dir), 'worker-%d.log' % index), 'w+')  # pylint: disable=consider-using-with
  process = subprocess.Popen(serve_command(hosts, index, all_reduce_first), cwd=ROOT,
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=functools.partial(die_with_parent, os.getpid()))
  process.log = log
  return process


def output(process):
  process.log.seek(0)
  return process.log.read()


def wait_serving(process):
  deadline = time.monotonic() + START_SECS
  while 'serving' not in output(process):
    assert process.poll() is None, output(process)
    assert time.monotonic() < deadline, 'no "serving" within %d s:\n%s' % (
        START_SECS, output(process))
    time.sleep(0.1)


def end(processes):
  """SIGCONT (a stopped process cannot die of SIGKILL's pending delivery otherwise no
  sooner) and SIGKILL to each, then reaped; never raises."""
  for process in processes:
    if process.poll() is None:
      for signum in (signal.SIGCONT, signal.SIGKILL):
        try:
          process.send_signal(signum)
        except ProcessLookupError:
          pass
  for process in processes:
    try:
      process.wait(10)
    except subprocess.TimeoutExpired:
      pass
    process.log.close()


@pytest.mark.parametrize('ps_hosts, job, index, filters, leader', [
    (('h:1',), 'ps', 0, ['/job:ps/task:0'], ''),
    (('h:1',), 'worker', 1, ['/job:ps', '/job:worker/task:1'], ''),
    ((), 'worker', 1, ['/job:worker/task:1'], peers.COLLECTIVE_LEADER),
    ((), 'worker', 0, ['/job:worker/task:0'], '/job:worker/replica:0/task:0'),
])
def test_a_server_without_ps_names_the_group_leader_and_reaches_only_itself(
    ps_hosts, job, index, filters, leader):
  task = TaskSpec(ps_hosts, ('w:1', 'w:2'), job, index)
  config = peers.server_config(task, inter_op_threads=2)
  assert list(config.device_filters) == filters
  assert config.experimental.collective_group_leader == leader
  assert config.inter_op_parallelism_threads == 2


def test_a_workers_server_gets_a_cpu_device_per_clone_and_nccl_for_gpu_clones():
  worker = TaskSpec((), ('w:1', 'w:2'), 'worker', 1)
  plain = peers.server_config(worker)
  assert 'CPU' not in plain.device_count and not plain.experimental.collective_nccl
  clones = peers.server_config(worker, cpu_devices=2)
  assert clones.device_count['CPU'] == 2 and not clones.experimental.collective_nccl
  assert peers.server_config(worker, nccl=True).experimental.collective_nccl
  ps = peers.server_config(TaskSpec(('p:1',), ('w:1',), 'ps', 0), cpu_devices=2, nccl=True)
  assert 'CPU' not in ps.device_count and not ps.experimental.collective_nccl


def test_session_filters_without_ps_are_the_own_task_of_several_workers():
  # Stand-ins with DeploymentConfig's fields: worker_device is '' without ps before the
  # replicated variable update, '/job:worker' with it; both give the same filters.
  def deploy(num_ps_tasks, num_replicas, replica_id, worker_device=''):
    return types.SimpleNamespace(num_ps_tasks=num_ps_tasks, num_replicas=num_replicas,
                                 replica_id=replica_id, worker_device=worker_device,
                                 ps_device='/job:ps' if num_ps_tasks else '')
  assert ps_cluster.device_filters(deploy(0, 1, 0)) == []    # One process.
  assert ps_cluster.device_filters(deploy(0, 3, 2)) == ['/job:worker/task:2']
  assert ps_cluster.device_filters(deploy(0, 3, 1, '/job:worker')) == ['/job:worker/task:1']
  assert ps_cluster.device_filters(deploy(2, 3, 1, '/job:worker')) == [
      '/job:ps', '/job:worker/task:1']


def test_workers_started_by_start_server_all_reduce_and_the_probe_names_a_killed_and_a_frozen_one(
    tmp_path):
  """Worker 0 here, workers 1 and 2 processes (each start costs a TensorFlow import),
  every server started by start_server. The leader in the server's config is what lets
  the collective complete (without it every member waits at the first collective until
  its deadline, which ends the test). Then worker 1 is killed and worker 2 frozen: the
  probe names both within about one deadline."""
  hosts = loopback_workers(3)
  me = task_spec.resolve_task((), hosts, 'worker', 0)   # Worker 0: this process.
  server = ps_cluster.start_server(me)
  processes = []
  try:
    processes = [start(hosts, i, tmp_path, all_reduce_first=True) for i in (1, 2)]
    for process in processes:
      wait_serving(process)
    assert all_reduce(server.target, 0, len(hosts)) == [6.0, 6.0]
    for process in processes:
      deadline = time.monotonic() + 60
      while 'sum [6.0, 6.0]' not in output(process):
        assert process.poll() is None and time.monotonic() < deadline, output(process)
        time.sleep(0.1)
    began = time.monotonic()
    assert peers.unresponsive_workers(me, server.target, timeout_secs=2.0) == []
    assert time.monotonic() - began < 2.0   # Every worker answered: no waiting.
    processes[0].kill()
    processes[0].wait(10)
    processes[1].send_signal(signal.SIGSTOP)
    began = time.monotonic()
    silent = peers.unresponsive_workers(me, server.target, timeout_secs=2.0)
    took = time.monotonic() - began
    assert silent == [('worker', 1, hosts[1]), ('worker', 2, hosts[2])]
    assert took < 4.0, took   # In parallel: about one deadline, not one per worker.
    # TCP alone cannot tell the frozen one: it still accepts connections.
    assert ps_cluster.absent_tasks(me, timeout_secs=0.5) == [('worker', 1, hosts[1])]
  finally:
    end(processes)
