"""deployment/cluster/task_spec.py: which task a process is, from the flags or TF_CONFIG,
and the one-line mistakes of a description that cannot work."""

import json

import pytest

from deployment.cluster import task_spec
from deployment.cluster.task_spec import ClusterError, TaskSpec

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
  assert task_spec.resolve_task() is None
  assert task_spec.resolve_task((), (), None, 0, '') is None


def test_flags_describe_a_worker():
  task = task_spec.resolve_task(PS, WORKERS, 'worker', 2)
  assert task == TaskSpec(PS, WORKERS, 'worker', 2, 'flags')
  assert (task.num_ps, task.num_workers, task.is_chief, task.is_ps) == (1, 3, False, False)
  assert task.address == WORKERS[2]
  assert task_spec.resolve_task(PS, WORKERS, 'worker', 0).is_chief
  assert task_spec.resolve_task(PS, WORKERS, 'ps', 0).address == PS[0]


@pytest.mark.parametrize('task_type, index, job, expected_index', [
    ('chief', 0, 'worker', 0), ('master', 0, 'worker', 0), ('worker', 0, 'worker', 1),
    ('worker', 1, 'worker', 2), ('ps', 0, 'ps', 0)])
def test_tf_config_folds_the_chief_in_as_worker_0(task_type, index, job, expected_index):
  text = tf_config(task_type, index)
  if task_type == 'master':
    value = json.loads(text)
    value['cluster']['master'] = value['cluster'].pop('chief')
    text = json.dumps(value)
  task = task_spec.resolve_task(tf_config=text)
  assert (task.job_name, task.task_index, task.source) == (job, expected_index, 'TF_CONFIG')
  # Every task computes the same cluster, the one the flags would give.
  assert task.worker_hosts == WORKERS and task.ps_hosts == PS


def test_tf_config_without_chief_and_with_an_evaluator():
  task = task_spec.resolve_task(tf_config=tf_config('worker', 0, chief=False, evaluator=True))
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
    task_spec.resolve_task(**kwargs)
  assert message in str(error.value)
  assert '\n' not in str(error.value)


def test_workers_without_ps_are_a_cluster_whose_spec_has_no_ps_job():
  task = task_spec.resolve_task((), WORKERS, 'worker', 1)
  assert task == TaskSpec((), WORKERS, 'worker', 1, 'flags')
  assert (task.num_ps, task.num_workers, task.is_chief, task.is_ps) == (0, 3, False, False)
  assert task.cluster_spec().as_dict() == {'worker': list(WORKERS)}
  assert task.describe() == ('worker 1 of 3 at 10.0.0.3:2222; cluster of 3 workers without '
                             'ps (all-reduce) from flags')
  assert task_spec.resolve_task(PS, WORKERS, 'worker', 1).cluster_spec().jobs == [
      'ps', 'worker']
  assert task_spec.task_from_flags((), WORKERS[:1], 'worker', 0).is_chief  # One worker.


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
  task = task_spec.resolve_task(tf_config=text)
  assert task == TaskSpec((), WORKERS, 'worker', expected_index, 'TF_CONFIG')


def test_name_of_maps_devices_in_messages_to_hosts():
  task = task_spec.resolve_task(PS, WORKERS, 'worker', 1)
  assert task.name_of('from /job:ps/replica:0/task:0/device:CPU:0 x') == (
      '/job:ps/task:0 (10.0.0.1:2222)')
  assert task.name_of('nothing here') is None
  assert 'worker 1 of 3' in task.describe() and '1 ps + 3 workers from flags' in (
      task.describe())
