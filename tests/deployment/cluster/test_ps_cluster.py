"""deployment/cluster/ps_cluster.py: device filters, the parameter-server monitor and the
leaving queue (two in-process servers)."""

import socket
import threading

import pytest

import portpicker

from deployment import model_deploy
from deployment.cluster import ps_cluster
from deployment.cluster.task_spec import TaskSpec

WORKERS = ('10.0.0.2:2222', '10.0.0.3:2222', '10.0.0.4:2222')


def test_a_worker_without_ps_tells_no_parameter_server_it_leaves():
  task = TaskSpec((), WORKERS, 'worker', 1)
  assert ps_cluster.announce_leaving(task, 'grpc://127.0.0.1:1', timeout_secs=0.1) == 0


def test_device_filters_keep_a_worker_to_itself_and_the_ps():
  assert ps_cluster.device_filters(model_deploy.DeploymentConfig()) == []
  config = model_deploy.DeploymentConfig(replica_id=2, num_replicas=3, num_ps_tasks=2)
  assert ps_cluster.device_filters(config) == ['/job:ps', '/job:worker/task:2']


def test_monitor_reports_a_server_that_stops_answering_and_ignores_one_never_seen():
  listener = socket.socket()
  listener.bind(('127.0.0.1', 0))
  listener.listen()
  alive = '127.0.0.1:%d' % listener.getsockname()[1]
  never = '127.0.0.1:%d' % portpicker.pick_unused_port()
  lost = []
  done = threading.Event()

  def on_lost(index, host):
    lost.append((index, host))
    done.set()

  with ps_cluster.ParameterServerMonitor([never, alive], on_lost, interval_secs=0.05,
                                         lost_after_secs=0.2):
    threading.Event().wait(0.3)
    assert not lost
    listener.close()
    assert done.wait(5)
  assert lost == [(1, alive)]


def test_absent_tasks_are_the_others_that_refuse_a_connection():
  listener = socket.socket()
  listener.bind(('127.0.0.1', 0))
  listener.listen()
  alive = '127.0.0.1:%d' % listener.getsockname()[1]
  gone = ['127.0.0.1:%d' % portpicker.pick_unused_port() for _ in range(2)]
  try:
    # This task's own address (worker 0, gone[0]) is never reported.
    task = TaskSpec((alive,), (gone[0], alive, gone[1]), 'worker', 0)
    assert ps_cluster.absent_tasks(task, timeout_secs=0.5) == [('worker', 2, gone[1])]
  finally:
    listener.close()


def test_a_parameter_server_leaves_once_every_worker_has_left():
  from tf_compat import tf  # pylint: disable=import-outside-toplevel
  hosts = ['127.0.0.1:%d' % portpicker.pick_unused_port() for _ in range(3)]
  ps = TaskSpec(tuple(hosts[:1]), tuple(hosts[1:]), 'ps', 0)
  workers = [TaskSpec(ps.ps_hosts, ps.worker_hosts, 'worker', i) for i in range(2)]
  servers = [ps_cluster.start_server(t) for t in [ps] + workers]
  stop = threading.Event()
  result = {}
  waiter = threading.Thread(target=lambda: result.setdefault('left', (
      ps_cluster.wait_for_workers_to_leave(ps, servers[0].target, stop, 5.0, poll_secs=0.1,
                                           linger_secs=0.0))))
  waiter.start()
  assert ps_cluster.announce_leaving(workers[1], servers[2].target) == 1
  assert ps_cluster.announce_leaving(workers[1], servers[2].target) == 1  # Counted once.
  waiter.join(0.5)
  assert waiter.is_alive()
  assert ps_cluster.announce_leaving(workers[0], servers[1].target) == 1
  waiter.join(10)
  assert result['left'] == [0, 1]
  del tf


@pytest.mark.parametrize('environ, cores, threads', [
    ({}, 1, 2),                                   # One core: 2, not TensorFlow's 1.
    ({}, 2, 0),                                   # Otherwise TensorFlow's choice.
    ({}, 16, 0),
    ({'TF_NUM_INTEROP_THREADS': '1'}, 1, 0),      # The user's setting wins.
])
def test_a_one_core_task_gets_two_inter_op_threads(environ, cores, threads):
  assert ps_cluster.server_inter_op_threads(environ, cores) == threads
