"""Tests for deployment/placement.py: where clones ran, read from a traced step.

The graphs are two tiny conv clones built by model_deploy.deploy; the reference is the
session's own device list and hand-written step stats, not the graph's device strings.
"""

import pytest

from deployment import model_deploy, placement
from deployment.session_config import make_session_config
from tf_compat import tf

CPU = '/job:localhost/replica:0/task:0/device:CPU:%d'


def _traced_step(deploy_config, session_config):
  """Builds 2 conv clones with their own data, runs one traced train step."""
  graph = tf.Graph()
  with graph.as_default():
    def clone_fn():
      # Each clone its own random data: identical clones on one device would be merged
      # by grappler and leave nothing to see.
      images = tf.random.uniform([4, 8, 8, 1])
      weights = tf.get_variable('weights', [3, 3, 1, 4])
      features = tf.nn.conv2d(images, weights, 1, 'SAME')
      tf.losses.mean_squared_error(tf.zeros_like(features), features)
    deployed = model_deploy.deploy(deploy_config, clone_fn,
                                   optimizer=tf.train.GradientDescentOptimizer(0.1))
    init = tf.global_variables_initializer()
  run_metadata = tf.RunMetadata()
  with tf.Session(graph=graph, config=session_config) as sess:
    sess.run(init)
    sess.run(deployed.train_op, run_metadata=run_metadata,
             options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
  return run_metadata


def test_clones_on_their_own_logical_cpus_are_not_shared():
  deploy_config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  placements = placement.clone_placement(
      _traced_step(deploy_config, make_session_config(deploy_config)), deploy_config)
  assert [p.device for p in placements] == [CPU % 0, CPU % 1]
  assert [p.asked for p in placements] == ['/device:CPU:0', '/device:CPU:1']
  assert placement.shared_devices(placements) == {}
  # clone_1's input and variable reads still run on the worker's CPU: a minority.
  assert placements[1].ops_by_device[CPU % 1] > placements[1].ops_by_device.get(CPU % 0, 0)
  assert 'SHARED' not in '\n'.join(placement.describe_placement(placements))


def test_a_session_with_one_cpu_puts_both_clones_on_it():
  """The wrong config: 2 clones on CPU asked for, a session declaring 1 CPU device; soft
  placement runs clone 1 on CPU:0 and only the trace says so."""
  deploy_config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  placements = placement.clone_placement(
      _traced_step(deploy_config, make_session_config(None)), deploy_config)
  assert [p.device for p in placements] == [CPU % 0, CPU % 0]
  assert placement.shared_devices(placements) == {CPU % 0: (0, 1)}
  lines = placement.describe_placement(placements)
  assert lines[1].startswith('clone 1: asked /device:CPU:1, ran on /device:CPU:0 (')
  assert lines[1].endswith('SHARED with clone 0')


def test_gpu_clones_without_gpus_share_the_cpu():
  if tf.config.list_physical_devices('GPU'):
    pytest.skip('this machine has GPUs: the clones would get them')
  deploy_config = model_deploy.DeploymentConfig(num_clones=2)
  placements = placement.clone_placement(
      _traced_step(deploy_config, make_session_config(deploy_config)), deploy_config)
  assert placement.shared_devices(placements) == {CPU % 0: (0, 1)}


def test_gpu_streams_count_as_their_gpu_and_nodes_once():
  run_metadata = tf.RunMetadata()
  gpu = '/job:localhost/replica:0/task:0/device:GPU:%d'
  stats = {gpu % 0: ['clone_0/conv', 'clone_0/relu'],
           gpu % 0 + '/stream:all': ['clone_0/conv', 'clone_0/relu'],
           gpu % 0 + '/stream:12': ['clone_0/conv'],
           gpu % 1 + '/stream:all': ['clone_1/conv', 'ConstantFolding/clone_1/x'],
           CPU % 0: ['clone_0/IteratorGetNext', 'clone_1/IteratorGetNext', 'train_op']}
  for device, names in stats.items():
    dev_stats = run_metadata.step_stats.dev_stats.add(device=device)
    for name in names:
      dev_stats.node_stats.add(node_name=name)
  deploy_config = model_deploy.DeploymentConfig(num_clones=2)
  placements = placement.clone_placement(run_metadata, deploy_config)
  assert placements[0].ops_by_device == {gpu % 0: 2, CPU % 0: 1}
  assert placements[1].ops_by_device == {gpu % 1: 2, CPU % 0: 1}
  assert [p.device for p in placements] == [gpu % 0, gpu % 1]
  assert placement.shared_devices(placements) == {}


def test_one_clone_takes_every_op_of_the_step():
  deploy_config = model_deploy.DeploymentConfig(num_clones=1, clone_on_cpu=True)
  placements = placement.clone_placement(
      _traced_step(deploy_config, make_session_config(deploy_config)), deploy_config)
  assert len(placements) == 1 and placements[0].scope == ''
  assert placements[0].device == CPU % 0


def test_visible_devices_lists_the_logical_cpus_of_the_config():
  deploy_config = model_deploy.DeploymentConfig(num_clones=3, clone_on_cpu=True)
  devices = placement.visible_devices(make_session_config(deploy_config))
  assert devices.count('CPU') == 3
  assert (CPU % 2, 'CPU') in devices.logical
  assert devices.physical_gpus == tuple(
      d.name for d in tf.config.list_physical_devices('GPU'))
  assert placement.visible_devices(make_session_config(None)).count('CPU') == 1


def test_short_device_drops_only_the_local_prefix():
  assert placement.short_device(CPU % 1) == '/device:CPU:1'
  assert (placement.short_device('/job:worker/replica:0/task:1/device:GPU:0')
          == '/job:worker/replica:0/task:1/device:GPU:0')
