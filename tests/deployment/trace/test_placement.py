"""Tests for deployment/trace/placement.py: where clones ran, read from a traced step.

The graphs are two tiny conv clones built by model_deploy.deploy; the reference is the
session's own device list and hand-written step stats, not the graph's device strings.
"""

import pytest

from deployment import model_deploy
from deployment.trace import placement
from deployment.session.session_config import make_session_config
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



def _ps_graph_trace(num_clones):
  """A worker's step as a cluster traces it, made from a graph built for 1 ps task: each
  op the train op needs, on the device the graph placed it (unplaced: the worker's CPU),
  by its full name. Returns (deploy_config, run_metadata, {op name: full device})."""
  deploy_config = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_on_cpu=True, num_ps_tasks=1, num_replicas=2,
      replica_id=1)
  graph = tf.Graph()
  with graph.as_default():
    def clone_fn():
      net = tf.random.uniform([4, 8])
      for layer in range(3):
        weights = tf.get_variable('weights_%d' % layer, [8, 8])
        net = tf.nn.relu(tf.matmul(net, weights))
      tf.losses.mean_squared_error(tf.zeros_like(net), net)
    train_op = model_deploy.deploy(
        deploy_config, clone_fn, optimizer=tf.train.GradientDescentOptimizer(0.1)).train_op
  needed, pending = {}, [train_op.op]
  while pending:  # The step's ops: train_op and what it depends on (no initializers).
    op = pending.pop()
    if op.name not in needed:
      spec = tf.DeviceSpec.from_string(op.device or '/job:worker/task:1/device:CPU:0')
      needed[op.name] = '/job:%s/replica:0/task:%d/device:%s:%d' % (
          spec.job, spec.task, spec.device_type, spec.device_index)
      pending += [tensor.op for tensor in op.inputs] + list(op.control_inputs)
  return deploy_config, _trace(needed), needed


def _trace(devices):
  """RunMetadata whose step ran each node of {node name: device} once."""
  run_metadata = tf.RunMetadata()
  by_device = {}
  for name, device in sorted(devices.items()):
    if device not in by_device:
      by_device[device] = run_metadata.step_stats.dev_stats.add(device=device)
    by_device[device].node_stats.add(node_name=name)
  return run_metadata


@pytest.mark.parametrize('num_clones', [1, 2])
def test_ops_on_parameter_servers_are_counted_apart_from_the_clone(num_clones):
  deploy_config, run_metadata, devices = _ps_graph_trace(num_clones)
  placements = placement.clone_placement(run_metadata, deploy_config)
  worker_cpu = '/job:worker/replica:0/task:1/device:CPU:%d'
  assert [p.device for p in placements] == [worker_cpu % i for i in range(num_clones)]
  for p in placements:
    mine = {name: device for name, device in devices.items()
            if num_clones == 1 or p.scope in name.split('/')}
    on_ps = [name for name, device in mine.items() if device.startswith('/job:ps/')]
    assert p.ps_ops == len(on_ps)
    assert sum(p.ops_by_device.values()) == len(mine) - len(on_ps)
    assert not any(device.startswith('/job:ps/') for device in p.ops_by_device)
  # One clone has no scope: every variable of the model, its update included, is its.
  if num_clones == 1:
    assert placements[0].ps_ops > 0


def test_one_clone_runs_on_its_worker_although_the_ps_ran_more_ops():
  """As a 1-clone I3D worker traced it (2,268 ops, 1,110 on the ps: a variable, its
  momentum slot, its update, the tensors sent and received); with a second ps task, or
  grappler folding more of the model, the ps holds more of the step than the worker's
  CPU, and counting every op named the ps as the clone's device."""
  ps = '/job:ps/replica:0/task:0/device:CPU:0'
  worker = '/job:worker/replica:0/task:0/device:CPU:0'
  devices = {'i3d/Conv3d_%d/%s' % (layer, op): worker for layer in range(10)
             for op in ('conv3d', 'relu', 'grad')}
  devices.update({'i3d/Conv3d_%d/weights%s' % (layer, op): ps for layer in range(10)
                  for op in ('', '/Momentum', '/ApplyMomentum', '/_recv_grad')})
  deploy_config = model_deploy.DeploymentConfig(num_ps_tasks=1, clone_on_cpu=True)
  placements = placement.clone_placement(_trace(devices), deploy_config)
  assert placements[0].device == worker
  assert (placements[0].ops_by_device, placements[0].ps_ops) == ({worker: 30}, 40)
  assert placement.describe_placement(placements) == [
      'clone 0: asked /job:worker/task:0/device:CPU:0, ran on /job:worker/replica:0/task:0/'
      'device:CPU:0 (30 of 30 ops; 40 more on the parameter servers: variables, reads, '
      'updates)']


def test_a_clone_seen_only_on_the_ps_says_so():
  run_metadata = tf.RunMetadata()
  ps = run_metadata.step_stats.dev_stats.add(device='/job:ps/replica:0/task:0/device:CPU:0')
  ps.node_stats.add(node_name='weights')
  deploy_config = model_deploy.DeploymentConfig(num_ps_tasks=1)
  placements = placement.clone_placement(run_metadata, deploy_config)
  assert placements[0].device is None and placements[0].ps_ops == 1
  assert placement.describe_placement(placements) == [
      'clone 0: asked /job:worker/task:0/device:GPU:0, no op of it in the trace but 1 on '
      'the parameter servers']
