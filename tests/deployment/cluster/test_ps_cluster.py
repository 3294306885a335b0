"""deployment/cluster/ps_cluster.py: cluster resolution from flags and TF_CONFIG, device
filters, the parameter-server monitor and the leaving queue (two in-process servers)."""

import json
import socket
import threading

import pytest

import portpicker

from deployment import model_deploy
from deployment.cluster import ps_cluster
from deployment.cluster.ps_cluster import ClusterError, TaskSpec

PS = ('10.0.0.1:2222',)
WORKERS = ('10.0.0.2:2222', '10.0.0.3:2222', '10.0.0.4:2222')


def tf_config(task_type, index, chief=True, evaluator=False, **extra):
  spec = {'ps': list(PS), 'worker': list(WORKERS[1:] if chief else WORKERS)}
  if chief:
    spec['chief'] = [WORKERS[0]]
  if evaluator:
    spec['evaluator'] = ['10.0.0.9:2222']
  spec.update(extra)
  return json.dumps({'cluster': spec, 'task': {'type': task_type, 'index': index}})


def test_no_cluster_settings_mean_a_single_process():
  assert ps_cluster.resolve_task() is None
  assert ps_cluster.resolve_task((), (), None, 0, '') is None


def test_flags_describe_a_worker():
  task = ps_cluster.resolve_task(PS, WORKERS, 'worker', 2)
  assert task == TaskSpec(PS, WORKERS, 'worker', 2, 'flags')
  assert (task.num_ps, task.num_workers, task.is_chief, task.is_ps) == (1, 3, False, False)
  assert task.address == WORKERS[2]
  assert ps_cluster.resolve_task(PS, WORKERS, 'worker', 0).is_chief
  assert ps_cluster.resolve_task(PS, WORKERS, 'ps', 0).address == PS[0]


@pytest.mark.parametrize('task_type, index, job, expected_index', [
    ('chief', 0, 'worker', 0), ('master', 0, 'worker', 0), ('worker', 0, 'worker', 1),
    ('worker', 1, 'worker', 2), ('ps', 0, 'ps', 0)])
def test_tf_config_folds_the_chief_in_as_worker_0(task_type, index, job, expected_index):
  text = tf_config(task_type, index)
  if task_type == 'master':
    value = json.loads(text)
    value['cluster']['master'] = value['cluster'].pop('chief')
    text = json.dumps(value)
  task = ps_cluster.resolve_task(tf_config=text)
  assert (task.job_name, task.task_index, task.source) == (job, expected_index, 'TF_CONFIG')
  # Every task computes the same cluster, the one the flags would give.
  assert task.worker_hosts == WORKERS and task.ps_hosts == PS


def test_tf_config_without_chief_and_with_an_evaluator():
  task = ps_cluster.resolve_task(tf_config=tf_config('worker', 0, chief=False, evaluator=True))
  assert task.worker_hosts == WORKERS and task.is_chief
  assert '10.0.0.9:2222' not in task.worker_hosts + task.ps_hosts


@pytest.mark.parametrize('kwargs, message', [
    (dict(job_name='worker'), '--worker_hosts is empty'),
    (dict(worker_hosts=WORKERS), '--job_name is required'),
    (dict(worker_hosts=WORKERS, job_name='ps'),
     '--job_name=ps but --ps_hosts is empty: a cluster without parameter servers has '
     'workers only'),
    (dict(tf_config=json.dumps({'cluster': {'worker': ['a:1']}, 'task': {'type': 'ps'}})),
     'TF_CONFIG task.type=ps but TF_CONFIG cluster.ps is empty'),
    (dict(ps_hosts=PS, worker_hosts=WORKERS, job_name='chief'),
     '--job_name=chief is not a training job; valid: ps, worker'),
    (dict(ps_hosts=PS, worker_hosts=WORKERS, job_name='worker', task_index=3),
     '--task_index=3 is out of range: --worker_hosts lists 3 worker task(s), valid: 0..2'),
    (dict(ps_hosts=PS, worker_hosts=WORKERS, job_name='ps', task_index=1),
     '--task_index=1 is out of range: --ps_hosts lists 1 ps task(s), valid: 0..0'),
    (dict(ps_hosts=('10.0.0.1',), worker_hosts=WORKERS, job_name='ps'),
     "--ps_hosts: '10.0.0.1' is not host:port"),
    (dict(ps_hosts=('h:99999',), worker_hosts=WORKERS, job_name='ps'),
     'port 99999, not in 1..65535'),
    (dict(ps_hosts=PS, worker_hosts=WORKERS[:1] * 2, job_name='worker'),
     '--worker_hosts lists 10.0.0.2:2222 more than once'),
    (dict(ps_hosts=WORKERS[:1], worker_hosts=WORKERS, job_name='worker'),
     'both list 10.0.0.2:2222'),
    (dict(task_index=1), '--task_index=1 needs --ps_hosts'),
    (dict(ps_hosts=PS, worker_hosts=WORKERS, job_name='worker', tf_config=tf_config('ps', 0)),
     'both --ps_hosts/--worker_hosts/--job_name and TF_CONFIG'),
    (dict(task_index=1, tf_config=tf_config('ps', 0)), '--task_index=1 conflicts with TF_CONFIG'),
    (dict(tf_config='{"cluster": '), 'TF_CONFIG is not valid JSON'),
    (dict(tf_config='{"task": {"type": "ps"}}'), 'TF_CONFIG has no "cluster"'),
    (dict(tf_config='{"cluster": {"ps": ["a:1"]}}'), 'TF_CONFIG has no "task"'),
    (dict(tf_config=tf_config('evaluator', 0, evaluator=True)), 'run eval.py'),
    (dict(tf_config=tf_config('driver', 0)), "task.type='driver' is not known"),
    (dict(tf_config=tf_config('worker', 5)), 'TF_CONFIG task.index=6 is out of range'),
    (dict(tf_config=tf_config('ps', 0, master=['10.0.0.8:1'])), '2 chief/master tasks'),
    (dict(tf_config=tf_config('ps', 0, trainer=['10.0.0.8:1'])), 'unknown job(s) trainer'),
])
def test_mistakes_are_one_line_naming_the_setting(kwargs, message):
  with pytest.raises(ClusterError) as error:
    ps_cluster.resolve_task(**kwargs)
  assert message in str(error.value)
  assert '\n' not in str(error.value)


def test_workers_without_ps_are_a_cluster_whose_spec_has_no_ps_job():
  task = ps_cluster.resolve_task((), WORKERS, 'worker', 1)
  assert task == TaskSpec((), WORKERS, 'worker', 1, 'flags')
  assert (task.num_ps, task.num_workers, task.is_chief, task.is_ps) == (0, 3, False, False)
  assert task.cluster_spec().as_dict() == {'worker': list(WORKERS)}
  assert task.describe() == ('worker 1 of 3 at 10.0.0.3:2222; cluster of 3 workers without '
                             'ps (all-reduce) from flags')
  assert ps_cluster.resolve_task(PS, WORKERS, 'worker', 1).cluster_spec().jobs == [
      'ps', 'worker']
  assert ps_cluster.task_from_flags((), WORKERS[:1], 'worker', 0).is_chief  # One worker.


@pytest.mark.parametrize('cluster, task_type, index, expected_index', [
    ({'chief': WORKERS[:1], 'worker': list(WORKERS[1:])}, 'chief', 0, 0),
    ({'chief': WORKERS[:1], 'worker': list(WORKERS[1:])}, 'worker', 1, 2),
    ({'worker': list(WORKERS)}, 'worker', 0, 0),
    ({'worker': list(WORKERS), 'ps': []}, 'worker', 2, 2),
    ({'master': WORKERS[:1], 'worker': list(WORKERS[1:]), 'evaluator': ['10.0.0.9:1']},
     'worker', 0, 1),
])
def test_tf_config_without_ps_is_a_cluster_of_workers(cluster, task_type, index,
                                                      expected_index):
  text = json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})
  task = ps_cluster.resolve_task(tf_config=text)
  assert task == TaskSpec((), WORKERS, 'worker', expected_index, 'TF_CONFIG')
  assert ps_cluster.find_task('auto', ((), (), None, 0), {'TF_CONFIG': text}) == task


def test_a_worker_without_ps_tells_no_parameter_server_it_leaves():
  task = TaskSpec((), WORKERS, 'worker', 1)
  assert ps_cluster.announce_leaving(task, 'grpc://127.0.0.1:1', timeout_secs=0.1) == 0


def test_device_filters_keep_a_worker_to_itself_and_the_ps():
  assert ps_cluster.device_filters(model_deploy.DeploymentConfig()) == []
  config = model_deploy.DeploymentConfig(replica_id=2, num_replicas=3, num_ps_tasks=2)
  assert ps_cluster.device_filters(config) == ['/job:ps', '/job:worker/task:2']


def test_name_of_maps_devices_in_messages_to_hosts():
  task = ps_cluster.resolve_task(PS, WORKERS, 'worker', 1)
  assert task.name_of('from /job:ps/replica:0/task:0/device:CPU:0 x') == (
      '/job:ps/task:0 (10.0.0.1:2222)')
  assert task.name_of('nothing here') is None
  assert 'worker 1 of 3' in task.describe() and '1 ps + 3 workers from flags' in (
      task.describe())


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
