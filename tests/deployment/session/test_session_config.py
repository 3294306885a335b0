"""Tests for deployment/session/session_config.py: the ConfigProto every session is created with."""

import math

import pytest
from tensorflow.python.client import device_lib

from tf_compat import tf
from deployment import model_deploy
from deployment.session import session_config


def _cpu_names(devices):
  return sorted(d.name for d in devices if d.device_type == 'CPU')


@pytest.mark.parametrize('num_clones', [1, 2, 3])
def test_clone_on_cpu_declares_one_cpu_device_per_clone(num_clones):
  deploy_config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  config = session_config.make_session_config(deploy_config)
  assert dict(config.device_count) == {'CPU': num_clones}
  assert session_config.num_cpu_devices(deploy_config) == num_clones
  assert _cpu_names(device_lib.list_local_devices(config)) == [
      '/device:CPU:%d' % i for i in range(num_clones)]


def test_session_created_with_config_lists_three_cpus():
  deploy_config = model_deploy.DeploymentConfig(num_clones=3, clone_on_cpu=True)
  config = session_config.make_session_config(deploy_config)
  with tf.Graph().as_default():
    with tf.Session(config=config) as sess:
      names = [d.name for d in sess.list_devices() if d.device_type == 'CPU']
  assert sorted(name.rsplit('/', 1)[-1] for name in names) == [
      'device:CPU:0', 'device:CPU:1', 'device:CPU:2']


@pytest.mark.parametrize('deploy_config', [
    None,
    model_deploy.DeploymentConfig(),
    model_deploy.DeploymentConfig(num_clones=4),          # GPU clones: one CPU is enough
    model_deploy.DeploymentConfig(num_clones=2, num_ps_tasks=1),
], ids=['none', 'default', '4gpu', '2gpu_ps'])
def test_one_cpu_device_without_clone_on_cpu(deploy_config):
  config = session_config.make_session_config(deploy_config)
  assert dict(config.device_count) == {'CPU': 1}
  assert session_config.num_cpu_devices(deploy_config) == 1
  assert _cpu_names(device_lib.list_local_devices(config)) == ['/device:CPU:0']


def test_gpu_options_defaults():
  config = session_config.make_session_config()
  assert config.gpu_options.allow_growth is True
  assert config.gpu_options.per_process_gpu_memory_fraction == 0.0
  assert config.allow_soft_placement is True
  assert config.log_device_placement is False


@pytest.mark.parametrize('allow_growth', [True, False])
@pytest.mark.parametrize('fraction', [0.0, 0.25, 0.5, 1.0])
def test_gpu_options_are_carried(allow_growth, fraction):
  config = session_config.make_session_config(
      model_deploy.DeploymentConfig(num_clones=2),
      gpu_allow_growth=allow_growth, gpu_memory_fraction=fraction)
  assert config.gpu_options.allow_growth is allow_growth
  assert math.isclose(config.gpu_options.per_process_gpu_memory_fraction, fraction,
                      rel_tol=1e-6)


@pytest.mark.parametrize('fraction', [-0.1, -1.0, 1.0001, 2.0, float('nan')])
def test_gpu_memory_fraction_out_of_range_raises(fraction):
  with pytest.raises(ValueError, match='gpu_memory_fraction'):
    session_config.make_session_config(gpu_memory_fraction=fraction)


def test_other_options_are_carried():
  config = session_config.make_session_config(
      allow_soft_placement=False, log_device_placement=True, intra_op_threads=2,
      inter_op_threads=3, device_filters=['/job:ps', '/job:worker/task:1'])
  assert config.allow_soft_placement is False
  assert config.log_device_placement is True
  assert config.intra_op_parallelism_threads == 2
  assert config.inter_op_parallelism_threads == 3
  assert list(config.device_filters) == ['/job:ps', '/job:worker/task:1']
  assert list(session_config.make_session_config().device_filters) == []


def test_config_is_a_config_proto():
  assert isinstance(session_config.make_session_config(), tf.ConfigProto)
