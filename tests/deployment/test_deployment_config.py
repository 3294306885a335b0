"""Tests for deployment/deployment_config.py: DeploymentConfig's device strings and scopes
for every topology (TOPOLOGIES, also used by test_model_deploy.py on built graphs; no GPU
and no cluster needed: graphs that name GPUs or ps jobs are built, never run), and the
configurations it refuses, each naming its argument.
"""

import collections

import pytest

from tf_compat import tf
from deployment.deployment_config import DeploymentConfig


def canon(device):
  """Canonical device string ('' stays '')."""
  return tf.DeviceSpec.from_string(device).to_string() if device else ''


def assert_device(actual, expected):
  assert canon(actual) == canon(expected), (actual, expected)


# --------------------------------------------------------------------------------------
# Device strings and scopes for every topology

PS2 = ['/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0']
PS3 = PS2 + ['/job:ps/task:2/device:CPU:0']

Topology = collections.namedtuple('Topology', ['kwargs', 'clones', 'scopes', 'cpu', 'ps'])

TOPOLOGIES = {
    '1clone': Topology({}, ['/device:GPU:0'], [''], '/device:CPU:0', None),
    '4gpu': Topology({'num_clones': 4}, ['/device:GPU:%d' % i for i in range(4)],
                     ['clone_%d' % i for i in range(4)], '/device:CPU:0', None),
    '2cpu': Topology({'num_clones': 2, 'clone_on_cpu': True},
                     ['/device:CPU:0', '/device:CPU:1'], ['clone_0', 'clone_1'],
                     '/device:CPU:0', None),
    '3cpu': Topology({'num_clones': 3, 'clone_on_cpu': True},
                     ['/device:CPU:0', '/device:CPU:1', '/device:CPU:2'],
                     ['clone_0', 'clone_1', 'clone_2'], '/device:CPU:0', None),
    '2ps': Topology({'num_ps_tasks': 2}, ['/job:worker/task:0/device:GPU:0'], [''],
                    '/job:worker/task:0/device:CPU:0', PS2),
    'replicas_clones_ps': Topology(
        {'num_replicas': 3, 'replica_id': 2, 'num_clones': 2, 'num_ps_tasks': 2},
        ['/job:worker/task:2/device:GPU:0', '/job:worker/task:2/device:GPU:1'],
        ['clone_0', 'clone_1'], '/job:worker/task:2/device:CPU:0', PS2),
    'custom_jobs': Topology(
        {'num_replicas': 2, 'replica_id': 1, 'num_clones': 2, 'num_ps_tasks': 3,
         'worker_job_name': 'trainer', 'ps_job_name': 'params'},
        ['/job:trainer/task:1/device:GPU:0', '/job:trainer/task:1/device:GPU:1'],
        ['clone_0', 'clone_1'], '/job:trainer/task:1/device:CPU:0',
        ['/job:params/task:%d/device:CPU:0' % t for t in range(3)]),
    'cpu_clones_ps': Topology(
        {'num_clones': 2, 'clone_on_cpu': True, 'num_ps_tasks': 1},
        ['/job:worker/task:0/device:CPU:0', '/job:worker/task:0/device:CPU:1'],
        ['clone_0', 'clone_1'], '/job:worker/task:0/device:CPU:0',
        ['/job:ps/task:0/device:CPU:0']),
}


@pytest.mark.parametrize('name', sorted(TOPOLOGIES))
def test_device_strings_and_scopes(name):
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  assert config.num_clones == len(topo.clones)
  for i, (device, scope) in enumerate(zip(topo.clones, topo.scopes)):
    assert_device(config.clone_device(i), device)
    assert config.clone_scope(i) == scope
  assert_device(config.optimizer_device(), topo.cpu)
  assert_device(config.inputs_device(), topo.cpu)
  assert_device(config.summary_device(), topo.cpu)
  if topo.ps is None:
    assert config.caching_device() is None
    assert_device(config.variables_device(), '/device:CPU:0')
    assert config.ps_device == '' and config.worker_device == ''
  else:
    caching = config.caching_device()
    assert callable(caching)
    assert callable(config.variables_device())
    job = topo.kwargs.get('ps_job_name', 'ps')
    assert config.ps_device == '/job:' + job
    assert config.worker_device == '/job:' + topo.kwargs.get('worker_job_name', 'worker')


@pytest.mark.parametrize('name', sorted(TOPOLOGIES))
def test_devices_on_built_graph(name):
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    for i, device in enumerate(topo.clones):
      with tf.device(config.clone_device(i)):
        assert_device(tf.constant(1.0).op.device, device)
    with tf.device(config.optimizer_device()):
      assert_device(tf.no_op().device, topo.cpu)
    with tf.device(config.inputs_device()):
      assert_device(tf.constant(1.0).op.device, topo.cpu)
    num_vars = 2 * len(topo.ps or [None, None])
    with tf.device(config.variables_device()):
      ref_vars = [tf.Variable(float(i), name='ref%d' % i) for i in range(num_vars)]
      other = tf.no_op()
      if topo.ps is not None:
        cached = tf.get_variable('cached', [], caching_device=config.caching_device())
    if topo.ps is None:
      for var in ref_vars:
        assert_device(var.op.device, '/device:CPU:0')
      assert_device(other.device, '/device:CPU:0')
    else:
      expected = [topo.ps[i % len(topo.ps)] for i in range(num_vars)]
      assert [canon(v.op.device) for v in ref_vars] == [canon(d) for d in expected]
      assert other.device == ''  # non-variable ops keep their device
      # Equal sizes balance like round robin; after num_vars (a multiple of the task
      # count) every task holds as many bytes, and the tie goes to task 0.
      assert_device(cached.op.device, topo.ps[0])


@pytest.mark.parametrize('kwargs', [{}, {'num_clones': 3}, {'num_ps_tasks': 2},
                                    {'num_clones': 2, 'clone_on_cpu': True}])
def test_clone_index_out_of_range_raises(kwargs):
  config = DeploymentConfig(**kwargs)
  for bad in (-1, config.num_clones, config.num_clones + 5):
    with pytest.raises(ValueError, match='clone_index'):
      config.clone_device(bad)
    with pytest.raises(ValueError, match='clone_index'):
      config.clone_scope(bad)


def test_caching_device_reads_on_the_reading_op_device():
  config = DeploymentConfig(num_ps_tasks=1)
  with tf.Graph().as_default():
    with tf.device('/job:worker/task:0/device:GPU:1'):
      op = tf.no_op()
  assert config.caching_device()(op) == op.device


# --------------------------------------------------------------------------------------
# Invalid configurations


@pytest.mark.parametrize('kwargs, argument', [
    ({'num_clones': 0}, 'num_clones'),
    ({'num_clones': -2}, 'num_clones'),
    ({'num_clones': 1.5}, 'num_clones'),
    ({'num_clones': '2'}, 'num_clones'),
    ({'num_clones': None}, 'num_clones'),
    ({'num_replicas': 0, 'num_ps_tasks': 1}, 'num_replicas'),
    ({'num_replicas': 0}, 'num_replicas'),
    ({'num_ps_tasks': -1}, 'num_ps_tasks'),
    ({'num_ps_tasks': 1.0}, 'num_ps_tasks'),
    ({'replica_id': 3, 'num_replicas': 3, 'num_ps_tasks': 1}, 'replica_id'),
    ({'replica_id': 1}, 'replica_id'),
    ({'replica_id': -1}, 'replica_id'),
    ({'num_replicas': 2, 'num_ps_tasks': 0}, 'num_ps_tasks'),
    ({'num_ps_tasks': 1, 'worker_job_name': ''}, 'worker_job_name'),
    ({'num_replicas': 2, 'num_ps_tasks': 1, 'worker_job_name': ''}, 'worker_job_name'),
    ({'num_ps_tasks': 2, 'ps_job_name': ''}, 'ps_job_name'),
    ({'num_replicas': 2, 'num_ps_tasks': 1, 'ps_job_name': None}, 'ps_job_name'),
])
def test_invalid_config_raises_naming_argument(kwargs, argument):
  with pytest.raises(ValueError, match=r'\b%s\b' % argument):
    DeploymentConfig(**kwargs)


def test_empty_job_names_accepted_without_ps_and_replicas():
  config = DeploymentConfig(num_clones=2, worker_job_name='', ps_job_name='')
  assert_device(config.clone_device(1), '/device:GPU:1')
  assert_device(config.variables_device(), '/device:CPU:0')
  assert_device(config.optimizer_device(), '/device:CPU:0')
