"""Tests for deployment/model_deploy.py (DeploymentConfig alone: test_deployment_config.py).

Device placement is checked on built graphs for every topology (no GPU and no
cluster needed: graphs that name GPUs or ps jobs are built, never run). Numerical tests run
on logical CPU devices and compare against NumPy or a single-clone run.
"""

import collections

import numpy as np
import pytest
from tensorflow.python.client import device_lib

from tf_compat import tf, slim
from deployment import model_deploy
from deployment.session import session_config
from tests.deployment.test_deployment_config import TOPOLOGIES, assert_device, canon

DeploymentConfig = model_deploy.DeploymentConfig

# --------------------------------------------------------------------------------------
# Helpers


def device_type(device):
  return tf.DeviceSpec.from_string(device).device_type


def ps_task_of(device):
  spec = tf.DeviceSpec.from_string(device)
  assert spec.job == 'ps' and spec.device_type == 'CPU' and spec.device_index == 0, device
  return spec.task


def variable_ops(graph=None):
  graph = graph or tf.get_default_graph()
  return [op for op in graph.get_operations() if op.type in model_deploy.VARIABLE_OP_TYPES]


def summary_ops(graph=None):
  graph = graph or tf.get_default_graph()
  return [op for op in graph.get_operations() if op.type in model_deploy.SUMMARY_OP_TYPES]


def slim_model_fn():
  """Tiny conv net, ref variables (slim's default): 4 variables."""
  images = tf.ones([2, 6, 6, 3])
  net = slim.conv2d(images, 4, [3, 3], scope='conv')
  net = slim.flatten(net)
  logits = slim.fully_connected(net, 2, activation_fn=None, scope='fc')
  tf.losses.mean_squared_error(tf.zeros_like(logits), logits)
  return logits


def resource_model_fn():
  """Linear model with tf.get_variable(use_resource=True): 2 resource variables."""
  inputs = tf.ones([2, 3])
  weights = tf.get_variable('w', [3, 2], initializer=tf.ones_initializer(),
                            use_resource=True)
  biases = tf.get_variable('b', [2], initializer=tf.zeros_initializer(),
                           use_resource=True)
  logits = tf.nn.bias_add(tf.matmul(inputs, weights), biases)
  tf.losses.mean_squared_error(tf.zeros_like(logits), logits)
  return logits


MODEL_FNS = {'slim': (slim_model_fn, 'VariableV2', 4),
             'resource': (resource_model_fn, 'VarHandleOp', 2)}


def upstream_ops(tensor_or_op):
  """Every op the given op/tensor depends on (data and control inputs)."""
  start = tensor_or_op.op if isinstance(tensor_or_op, tf.Tensor) else tensor_or_op
  seen, stack = set(), [start]
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return seen


def cpu_session(config):
  return tf.Session(config=session_config.make_session_config(config))


# --------------------------------------------------------------------------------------
# 2. Placement on real graphs built by create_clones / deploy

PLACEMENT_TOPOLOGIES = ['1clone', '4gpu', '3cpu', '2ps', 'replicas_clones_ps', 'custom_jobs']


@pytest.mark.parametrize('model', sorted(MODEL_FNS))
@pytest.mark.parametrize('name', PLACEMENT_TOPOLOGIES)
@pytest.mark.parametrize('builder', ['create_clones', 'deploy'])
def test_variable_ops_placed(model, name, builder):
  model_fn, op_type, num_model_vars = MODEL_FNS[model]
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    if builder == 'create_clones':
      model_deploy.create_clones(config, model_fn)
    else:
      model_deploy.deploy(config, model_fn,
                          optimizer=tf.train.MomentumOptimizer(0.1, 0.9))
    ops = variable_ops()
    model_ops = [op for op in ops if op.type == op_type and 'global_step' not in op.name
                 and 'Momentum' not in op.name]
    assert len(model_ops) == num_model_vars, [op.name for op in ops]
    if builder == 'deploy':
      # global_step + model vars + one Momentum slot per model var.
      assert len(ops) == 1 + 2 * num_model_vars, [op.name for op in ops]
    for op in ops:
      if topo.ps is None:
        assert_device(op.device, topo.cpu)
      else:
        assert canon(op.device) in {canon(d) for d in topo.ps}, (op.name, op.device)


# Variables go to the ps task holding the fewest bytes so far (ties: the lowest task).
# slim_model_fn's, in creation order: conv/weights 3x3x3x4 floats = 432 B, conv/biases
# 16 B, fc/weights (6x6x4)x2 = 1152 B, fc/biases 8 B; resource_model_fn's: w 24 B, b 8 B.
BALANCED_ON_2 = {'slim': [0, 1, 1, 0],     # loads (432, 0) (432, 16) (432, 1168) (440, 1168)
                 'resource': [0, 1]}


@pytest.mark.parametrize('model', sorted(MODEL_FNS))
@pytest.mark.parametrize('num_clones', [1, 2])
def test_ps_balanced_by_bytes_in_creation_order(model, num_clones):
  model_fn, _, num_model_vars = MODEL_FNS[model]
  config = DeploymentConfig(num_clones=num_clones, num_ps_tasks=2)
  with tf.Graph().as_default():
    model_deploy.create_clones(config, model_fn)
    tasks = [ps_task_of(op.device) for op in variable_ops()]
  assert tasks == BALANCED_ON_2[model]
  assert collections.Counter(tasks) == {0: num_model_vars // 2, 1: num_model_vars // 2}


def test_ps_balanced_over_three_tasks():
  config = DeploymentConfig(num_clones=2, num_ps_tasks=3)
  with tf.Graph().as_default():
    model_deploy.create_clones(config, slim_model_fn)   # 4 variables
    tasks = [ps_task_of(op.device) for op in variable_ops()]
  # Loads: (432, 0, 0) (432, 16, 0) (432, 16, 1152) (432, 24, 1152).
  assert tasks == [0, 1, 2, 1]


def test_ps_counts_with_deploy():
  config = DeploymentConfig(num_clones=2, num_ps_tasks=2)
  with tf.Graph().as_default():
    model_deploy.deploy(config, slim_model_fn,
                        optimizer=tf.train.GradientDescentOptimizer(0.1))
    tasks = [ps_task_of(op.device) for op in variable_ops()]
  # global_step + 4 model variables over 2 tasks.
  assert len(tasks) == 5
  assert collections.Counter(tasks) == {0: 3, 1: 2}


def test_ps_balanced_in_creation_order_with_deploy():
  """deploy's variables (global_step first, an int64 of 8 B, then the model's)."""
  config = DeploymentConfig(num_clones=2, num_ps_tasks=2)
  with tf.Graph().as_default():
    model_deploy.deploy(config, slim_model_fn,
                        optimizer=tf.train.GradientDescentOptimizer(0.1))
    placed = [(op.name, ps_task_of(op.device)) for op in variable_ops()]
  # Loads: (8, 0) (8, 432) (24, 432) (1176, 432) (1176, 440).
  assert [task for _, task in placed] == [0, 1, 0, 0, 1], placed


def test_layers_of_large_weights_and_small_biases_split_evenly_by_bytes():
  """Round robin by variable put every weight of such layers on one task of two (what
  LeNet, CifarNet and I3D, with 2 or 4 variables per layer, got); balancing by bytes
  splits them evenly."""
  config = DeploymentConfig(num_ps_tasks=2)

  def model_fn():
    net = tf.ones([1, 1000])
    for i in range(4):
      net = slim.fully_connected(net, 1000, scope='fc%d' % i)
    return net

  with tf.Graph().as_default():
    model_deploy.create_clones(config, model_fn)
    loads = collections.Counter()
    for var in tf.global_variables():
      loads[ps_task_of(var.op.device)] += 4 * var.shape.num_elements()
  # Weights w0 -> 0, w1 -> 1, w2 -> 0, w3 -> 1 (round robin: all four on task 0).
  assert loads == {0: 2 * 4 * (1000 * 1000 + 1000), 1: 2 * 4 * (1000 * 1000 + 1000)}


def test_ps_balance_continues_across_clones():
  """Variables each clone creates for itself (tf.Variable) are balanced with the rest."""
  config = DeploymentConfig(num_clones=4, num_ps_tasks=2)

  def model_fn():
    return tf.Variable(0.0, name='per_clone_counter')

  with tf.Graph().as_default():
    model_deploy.create_clones(config, model_fn)
    tasks = [ps_task_of(op.device) for op in variable_ops()]
  assert len(tasks) == 4
  assert collections.Counter(tasks) == {0: 2, 1: 2}, tasks


@pytest.mark.parametrize('model', sorted(MODEL_FNS))
def test_variables_are_shared_between_clones(model):
  model_fn, _, num_model_vars = MODEL_FNS[model]
  counts = {}
  for num_clones in (1, 3):
    with tf.Graph().as_default():
      model_deploy.deploy(DeploymentConfig(num_clones=num_clones, clone_on_cpu=True),
                          model_fn, optimizer=tf.train.GradientDescentOptimizer(0.1))
      counts[num_clones] = (len(tf.trainable_variables()), len(tf.global_variables()),
                            len(variable_ops()))
  assert counts[1] == counts[3]
  assert counts[1][0] == num_model_vars


@pytest.mark.parametrize('name', ['1clone', '4gpu', '3cpu', 'replicas_clones_ps'])
def test_clone_scope_and_device(name):
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    clones = model_deploy.create_clones(config, slim_model_fn)
  assert len(clones) == len(topo.clones)
  for i, clone in enumerate(clones):
    assert isinstance(clone, model_deploy.Clone)
    assert_device(clone.device, topo.clones[i])
    if len(clones) == 1:
      assert clone.scope == ''
    else:
      assert clone.scope == 'clone_%d/' % i
      assert clone.outputs.op.name.startswith(clone.scope)
    assert_device(clone.outputs.op.device, topo.clones[i])


def test_create_clones_passes_args_and_calls_in_order():
  calls = []

  def model_fn(a, b=None):
    calls.append((a, b, tf.get_variable_scope().reuse))
    return a

  with tf.Graph().as_default():
    clones = model_deploy.create_clones(DeploymentConfig(num_clones=3), model_fn,
                                        args=[7], kwargs={'b': 'x'})
  assert [c.outputs for c in clones] == [7, 7, 7]
  assert [(a, b) for a, b, _ in calls] == [(7, 'x')] * 3
  assert [bool(reuse) for _, _, reuse in calls] == [False, True, True]


COMPUTE_TYPES = {'Conv2D', 'MatMul', 'BiasAdd', 'Relu', 'SquaredDifference',
                 'Conv2DBackpropFilter', 'Conv2DBackpropInput', 'BiasAddGrad', 'ReluGrad'}


@pytest.mark.parametrize('name', ['4gpu', '3cpu', 'replicas_clones_ps', 'custom_jobs'])
def test_compute_ops_on_clone_device(name):
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, slim_model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    per_clone = collections.Counter()
    grads_per_clone = collections.Counter()
    for op in tf.get_default_graph().get_operations():
      if op.type not in COMPUTE_TYPES:
        continue
      scope = op.name.split('/')[0]
      assert scope.startswith('clone_'), op.name
      i = int(scope[len('clone_'):])
      assert_device(op.device, topo.clones[i])
      per_clone[i] += 1
      if '/gradients/' in op.name:
        grads_per_clone[i] += 1
    # The summed gradients and the total loss live on the optimizer device.
    sums = [op for op in tf.get_default_graph().get_operations()
            if op.name.endswith('/sum_grads')]
    assert len(sums) == 4
    for op in sums:
      assert_device(op.device, topo.cpu)
    assert_device(model.total_loss.op.device, topo.cpu)
  assert sorted(per_clone) == list(range(len(topo.clones)))
  assert len(set(per_clone.values())) == 1          # every clone has the same ops
  assert sorted(grads_per_clone) == list(range(len(topo.clones)))


@pytest.mark.parametrize('name', ['1clone', '4gpu', 'replicas_clones_ps'])
def test_inputs_device_inside_model_fn_is_honoured(name):
  """The input pattern of training/train.py: get_next() under inputs_device() in model_fn.

  The module docstring puts inputs on the worker's CPU, and nested tf.device scopes win
  over the clone's device in slim's model_deploy; the clone device function must not move
  the op to the clone's GPU.
  """
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    with tf.device(config.inputs_device()):
      iterator = tf.data.make_one_shot_iterator(
          tf.data.Dataset.from_tensors(tf.ones([2, 6, 6, 3])).repeat())

    def model_fn():
      with tf.device(config.inputs_device()):
        images = iterator.get_next()
      logits = slim.fully_connected(slim.flatten(images), 2, scope='fc')
      tf.losses.mean_squared_error(tf.zeros_like(logits), logits)
      return images

    clones = model_deploy.create_clones(config, model_fn)
  for clone in clones:
    assert clone.outputs.op.type == 'IteratorGetNext'
    assert_device(clone.outputs.op.device, topo.cpu)


@pytest.mark.parametrize('name', ['1clone', '4gpu', 'replicas_clones_ps'])
def test_explicit_device_inside_model_fn_is_honoured(name):
  """An op the model pins to the CPU (tf.device inside model_fn) stays on a CPU."""
  config = DeploymentConfig(**TOPOLOGIES[name].kwargs)
  pinned = []

  def model_fn():
    logits = slim_model_fn()
    with tf.device('/device:CPU:0'):
      pinned.append(tf.identity(logits, name='pinned_to_cpu'))
    return logits

  with tf.Graph().as_default():
    model_deploy.create_clones(config, model_fn)
  for tensor in pinned:
    assert device_type(tensor.op.device) == 'CPU', (tensor.op.name, tensor.op.device)


# --------------------------------------------------------------------------------------
# 3. Summaries always on a CPU


def summary_model_fn():
  logits = slim_model_fn()
  tf.summary.scalar('inside/mean_logit', tf.reduce_mean(logits))
  tf.summary.histogram('inside/logits', logits)
  tf.summary.image('inside/images', tf.ones([1, 4, 4, 3]))
  return logits


@pytest.mark.parametrize('name', ['1clone', '4gpu', '2ps', 'replicas_clones_ps',
                                  'custom_jobs'])
@pytest.mark.parametrize('with_optimizer', [True, False])
def test_every_summary_op_on_cpu(name, with_optimizer):
  topo = TOPOLOGIES[name]
  config = DeploymentConfig(**topo.kwargs)
  with tf.Graph().as_default():
    kwargs = {}
    if with_optimizer:
      kwargs = dict(optimizer=tf.train.GradientDescentOptimizer(0.1),
                    summarize_gradients=True, clip_gradient_norm=1.0)
    model = model_deploy.deploy(config, summary_model_fn, **kwargs)
    ops = summary_ops()
    types = collections.Counter(op.type for op in ops)
    for op in ops:
      assert device_type(op.device) == 'CPU', (op.name, op.type, op.device)
      assert_device(op.device, topo.cpu)
    assert model.summary_op is not None
    assert model.summary_op.op.type == 'MergeSummary'
  assert types['ImageSummary'] == len(topo.clones)     # built in every clone
  assert types['MergeSummary'] == 1
  if with_optimizer:
    assert types['HistogramSummary'] == len(topo.clones) + 4   # + one per gradient
    names = {op.name for op in ops}
    assert 'gradient_global_norm' in names


def test_summary_op_takes_first_clone_summaries_and_every_clone_loss():
  config = DeploymentConfig(num_clones=3)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, summary_model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    merged = {t.op.name for t in model.summary_op.op.inputs}
  assert 'clone_0/inside/mean_logit' in merged
  assert 'clone_0/inside/logits' in merged
  others = {n for n in merged if n.startswith(('clone_1/', 'clone_2/'))}
  assert others == {'clone_1/Losses/clone_loss', 'clone_2/Losses/clone_loss'}, merged
  assert {'Losses/total_loss', 'clone_0/Losses/clone_loss', 'gradient_global_norm'} <= merged


# --------------------------------------------------------------------------------------
# 5. Numerical equivalence: 2 clones of batch b == 1 clone of batch 2b (no batch norm)

BATCH = 3          # per clone
IN_DIM, HIDDEN, OUT_DIM = 4, 5, 3
STEPS = 5


def mlp_initial_values():
  rng = np.random.RandomState(1234)
  return {'fc1/weights': rng.randn(IN_DIM, HIDDEN).astype(np.float32) * 0.5,
          'fc1/biases': rng.randn(HIDDEN).astype(np.float32) * 0.1,
          'fc2/weights': rng.randn(HIDDEN, OUT_DIM).astype(np.float32) * 0.5,
          'fc2/biases': rng.randn(OUT_DIM).astype(np.float32) * 0.1}


def mlp_data():
  rng = np.random.RandomState(99)
  inputs = rng.randn(STEPS, 2 * BATCH, IN_DIM).astype(np.float32)
  targets = rng.randn(STEPS, 2 * BATCH, OUT_DIM).astype(np.float32)
  return inputs, targets


def train_mlp(num_clones, trace=False):
  """Trains the MLP for STEPS SGD steps; the global batch is always 2 * BATCH."""
  init = mlp_initial_values()
  inputs, targets = mlp_data()
  per_clone = 2 * BATCH // num_clones
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  placeholders = []

  def model_fn():
    x = tf.placeholder(tf.float32, [per_clone, IN_DIM], name='x')
    y = tf.placeholder(tf.float32, [per_clone, OUT_DIM], name='y')
    placeholders.append((x, y))
    net = slim.fully_connected(
        x, HIDDEN, activation_fn=tf.tanh, scope='fc1',
        weights_initializer=tf.constant_initializer(init['fc1/weights']),
        biases_initializer=tf.constant_initializer(init['fc1/biases']))
    net = slim.fully_connected(
        net, OUT_DIM, activation_fn=None, scope='fc2',
        weights_initializer=tf.constant_initializer(init['fc2/weights']),
        biases_initializer=tf.constant_initializer(init['fc2/biases']))
    tf.losses.mean_squared_error(y, net)
    return net

  with tf.Graph().as_default():
    model = model_deploy.deploy(config, model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.5))
    variables = {v.op.name: v for v in tf.trainable_variables()}
    devices = []
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      start = sess.run(variables)
      for step in range(STEPS):
        feed = {}
        for i, (x, y) in enumerate(placeholders):
          feed[x] = inputs[step, i * per_clone:(i + 1) * per_clone]
          feed[y] = targets[step, i * per_clone:(i + 1) * per_clone]
        if trace and step == 0:
          metadata = tf.RunMetadata()
          sess.run(model.train_op, feed_dict=feed, run_metadata=metadata,
                   options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
          devices = {d.device: [n.node_name for n in d.node_stats]
                     for d in metadata.step_stats.dev_stats}
        else:
          sess.run(model.train_op, feed_dict=feed)
      final = sess.run(variables)
  return start, final, devices


def test_two_cpu_clones_equal_one_clone_of_double_batch():
  start_a, final_a, devices = train_mlp(num_clones=2, trace=True)
  start_b, final_b, _ = train_mlp(num_clones=1)
  assert sorted(final_a) == sorted(final_b) == sorted(mlp_initial_values())
  for name, value in mlp_initial_values().items():
    np.testing.assert_array_equal(start_a[name], value)
    np.testing.assert_array_equal(start_b[name], value)
  for name in final_b:
    assert not np.allclose(final_b[name], start_b[name]), name   # training moved it
    np.testing.assert_allclose(final_a[name], final_b[name], rtol=1e-5, atol=1e-6,
                               err_msg=name)
  # Run A really ran on two logical CPU devices, clone_1's ops on CPU:1.
  by_device = {name.rsplit('/', 1)[-1]: nodes for name, nodes in devices.items()}
  assert {'device:CPU:0', 'device:CPU:1'} <= set(by_device), sorted(devices)
  assert any(n.startswith('clone_1/') for n in by_device['device:CPU:1'])
  assert any(n.startswith('clone_0/') for n in by_device['device:CPU:0'])
  assert not any(n.startswith('clone_1/fc') for n in by_device['device:CPU:0'])


def test_two_clone_session_has_two_cpu_devices():
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  devices = device_lib.list_local_devices(session_config.make_session_config(config))
  assert sorted(d.name for d in devices if d.device_type == 'CPU') == [
      '/device:CPU:0', '/device:CPU:1']


# --------------------------------------------------------------------------------------
# 6. Gradients vs NumPy; 7. regularization counted once


def linear_problem(num_rows=6, seed=0):
  """float32-representable data (tf.losses computes in float32); NumPy works in float64."""
  rng = np.random.RandomState(seed)
  as32 = lambda a: a.astype(np.float32).astype(np.float64)
  return (as32(rng.randn(num_rows, 4)), as32(rng.randn(num_rows, 1)),
          as32(rng.randn(4, 1)), as32(rng.randn(1)))


def linear_model_fn_factory(x, y, w0, c0, num_clones, regularizer=None, dtype=tf.float32):
  """model_fn giving clone i rows [i*b, (i+1)*b) of (x, y); pred = x w + c."""
  rows = x.shape[0] // num_clones
  counter = iter(range(num_clones))

  def model_fn():
    i = next(counter)
    inputs = tf.constant(x[i * rows:(i + 1) * rows], dtype=dtype)
    labels = tf.constant(y[i * rows:(i + 1) * rows], dtype=dtype)
    pred = slim.fully_connected(
        inputs, 1, activation_fn=None, scope='linear',
        weights_initializer=tf.constant_initializer(w0, dtype=dtype),
        biases_initializer=tf.constant_initializer(c0, dtype=dtype),
        weights_regularizer=regularizer)
    tf.losses.mean_squared_error(labels, pred)
    return pred
  return model_fn


def numpy_linear(x, y, w, c):
  """Mean squared error over all rows and its gradient (dL/dw, dL/dc)."""
  residual = x @ w + c - y
  n = residual.size
  return np.mean(residual ** 2), 2.0 / n * x.T @ residual, 2.0 / n * residual.sum(0)


@pytest.mark.parametrize('num_clones', [1, 2, 3])
def test_optimize_clones_gradient_equals_numpy(num_clones):
  x, y, w0, c0 = linear_problem()
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  with tf.Graph().as_default():
    clones = model_deploy.create_clones(
        config, linear_model_fn_factory(x, y, w0, c0, num_clones))
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, tf.train.GradientDescentOptimizer(1.0))
    assert len(grads_and_vars) == 2
    grads = {v.op.name: g for g, v in grads_and_vars}
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      loss, got = sess.run([total_loss, grads])
  expected_loss, grad_w, grad_c = numpy_linear(x, y, w0, c0)
  np.testing.assert_allclose(loss, expected_loss, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got['linear/weights'], grad_w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got['linear/biases'], grad_c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('num_clones', [2, 3])
def test_regularization_collection_has_one_entry_per_variable(num_clones):
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)

  def model_fn():
    net = slim.fully_connected(tf.ones([2, 3]), 4, scope='fc1',
                               weights_regularizer=slim.l2_regularizer(0.1))
    net = slim.fully_connected(net, 2, scope='fc2',
                               weights_regularizer=slim.l2_regularizer(0.1))
    tf.losses.mean_squared_error(tf.zeros_like(net), net)
    return net

  with tf.Graph().as_default():
    model_deploy.deploy(config, model_fn, optimizer=tf.train.GradientDescentOptimizer(0.1))
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 2
    assert len(tf.get_collection(tf.GraphKeys.LOSSES)) == num_clones


@pytest.mark.parametrize('num_clones', [1, 2, 3])
@pytest.mark.parametrize('with_optimizer', [True, False])
def test_total_loss_is_mean_data_loss_plus_regularization_once(num_clones, with_optimizer):
  scale = 0.3
  x, y, w0, c0 = linear_problem(seed=1)
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  lr = 0.1
  with tf.Graph().as_default():
    model_fn = linear_model_fn_factory(x, y, w0, c0, num_clones,
                                       regularizer=slim.l2_regularizer(scale))
    optimizer = tf.train.GradientDescentOptimizer(lr) if with_optimizer else None
    model = model_deploy.deploy(config, model_fn, optimizer=optimizer)
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1
    weights, biases = slim.get_model_variables()
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      loss = sess.run(model.total_loss)
      if with_optimizer:
        sess.run(model.train_op)
        w1, c1 = sess.run([weights, biases])
  data_loss, grad_w, grad_c = numpy_linear(x, y, w0, c0)
  regularization = scale * 0.5 * np.sum(w0 ** 2)
  np.testing.assert_allclose(loss, data_loss + regularization, rtol=1e-5, atol=1e-6)
  if with_optimizer:
    # The regularizer's gradient (scale * w) is applied once, not per clone.
    np.testing.assert_allclose(w1, w0 - lr * (grad_w + scale * w0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c1, c0 - lr * grad_c, rtol=1e-5, atol=1e-6)


def test_sparse_gradients_summed_across_clones():
  """tf.gather gives IndexedSlices per clone; the summed update matches NumPy."""
  table0 = np.arange(12, dtype=np.float32).reshape(6, 2) / 10.0
  ids = np.array([0, 2, 2, 5, 1, 2])
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  counter = iter(range(2))

  def model_fn():
    i = next(counter)
    table = tf.get_variable('table', initializer=tf.constant(table0))
    rows = tf.gather(table, tf.constant(ids[3 * i:3 * i + 3]))
    tf.losses.mean_squared_error(tf.zeros_like(rows), rows)
    return rows

  with tf.Graph().as_default():
    clones = model_deploy.create_clones(config, model_fn)
    _, grads_and_vars = model_deploy.optimize_clones(
        clones, tf.train.GradientDescentOptimizer(1.0))
    [(grad, var)] = grads_and_vars
    assert isinstance(grad, tf.IndexedSlices)
    train = tf.train.GradientDescentOptimizer(1.0).apply_gradients(grads_and_vars)
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train)
      table1 = sess.run(var)
  # loss = mean over 6x2 elements of table[ids]^2 -> d/dtable[r] = sum_{ids==r} 2 t / 12
  expected_grad = np.zeros_like(table0)
  for r in ids:
    expected_grad[r] += 2.0 * table0[r] / ids.size / 2
  np.testing.assert_allclose(table1, table0 - expected_grad, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------
# 8. Batch norm: moving statistics follow clone_0 only

BN_DECAY = 0.7
BN_STEPS = 4


def bn_data(shape, seed):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def train_batch_norm(clone_data, fused):
  """BN directly on each clone's constant input; returns moving mean/var and the graph."""
  num_clones = len(clone_data)
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  counter = iter(range(num_clones))

  def model_fn():
    inputs = tf.constant(clone_data[next(counter)])
    outputs = slim.batch_norm(inputs, decay=BN_DECAY, is_training=True, fused=fused,
                              updates_collections=tf.GraphKeys.UPDATE_OPS)
    tf.losses.mean_squared_error(tf.ones_like(outputs), outputs)
    return outputs

  with tf.Graph().as_default():
    model = model_deploy.deploy(config, model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    deps = upstream_ops(model.train_op)
    in_train_op = {op.name.split('/')[0] for op in update_ops if op in deps}
    all_scopes = {op.name.split('/')[0] for op in update_ops}
    [moving_mean] = [v for v in tf.global_variables() if 'moving_mean' in v.name]
    [moving_var] = [v for v in tf.global_variables() if 'moving_variance' in v.name]
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(BN_STEPS):
        sess.run(model.train_op)
      mean, var = sess.run([moving_mean, moving_var])
  return mean, var, in_train_op, all_scopes


BN_CASES = {'2d_unfused': ((4, 3), False), '4d_default': ((4, 2, 2, 3), None),
            '4d_unfused': ((4, 2, 2, 3), False)}


@pytest.mark.parametrize('case', sorted(BN_CASES))
def test_batch_norm_moving_mean_follows_clone_0_only(case):
  shape, fused = BN_CASES[case]
  clone0 = bn_data(shape, seed=5)
  axes = tuple(range(len(shape) - 1))
  # Closed form: from 0, k steps of m <- d m + (1 - d) mu give (1 - d^k) mu.
  expected_mean = (1 - BN_DECAY ** BN_STEPS) * clone0.mean(axis=axes)
  results = []
  for clone1 in (clone0 * 2.0 + 50.0, -bn_data(shape, seed=6) * 10.0 - 30.0):
    mean, var, in_train_op, all_scopes = train_batch_norm([clone0, clone1], fused)
    assert all_scopes == {'clone_0', 'clone_1'}     # both clones made update ops ...
    assert in_train_op == {'clone_0'}                # ... only clone_0's are run
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-5, atol=1e-6)
    results.append((mean, var))
  # clone_1's data has no influence on either moving statistic.
  np.testing.assert_array_equal(results[0][0], results[1][0])
  np.testing.assert_array_equal(results[0][1], results[1][1])
  if fused is False:   # slim's unfused path: biased batch variance (nn.moments)
    expected_var = (BN_DECAY ** BN_STEPS * 1.0
                    + (1 - BN_DECAY ** BN_STEPS) * clone0.var(axis=axes))
    np.testing.assert_allclose(results[0][1], expected_var, rtol=1e-5, atol=1e-6)


def test_batch_norm_single_clone_uses_its_whole_batch():
  shape = (4, 3)
  data = bn_data(shape, seed=7)
  mean, _, in_train_op, _ = train_batch_norm([data], fused=False)
  assert in_train_op == {'BatchNorm'}
  np.testing.assert_allclose(mean, (1 - BN_DECAY ** BN_STEPS) * data.mean(0),
                             rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------
# 9. deploy options


@pytest.mark.parametrize('num_clones', [1, 2])
def test_deploy_without_optimizer(num_clones):
  x, y, w0, c0 = linear_problem(seed=2)
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, linear_model_fn_factory(x, y, w0, c0, num_clones))
    assert isinstance(model, model_deploy.DeployedModel)
    assert model.train_op is None
    assert model.total_loss is not None
    assert len(model.clones) == num_clones
    assert model.summary_op is not None
    assert not tf.get_collection(tf.GraphKeys.TRAIN_OP)
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      loss = sess.run(model.total_loss)
      weights = sess.run(slim.get_model_variables()[0])
  np.testing.assert_allclose(loss, numpy_linear(x, y, w0, c0)[0], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(weights, w0)


@pytest.mark.parametrize('use_resource', [False, True])
def test_moving_average_follows_updated_weights(use_resource):
  x, y, w0, c0 = linear_problem(seed=3)
  lr, decay = 0.2, 0.9
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    ema = tf.train.ExponentialMovingAverage(decay)
    with tf.variable_scope('', use_resource=use_resource):
      model = model_deploy.deploy(config, linear_model_fn_factory(x, y, w0, c0, 2),
                                  optimizer=tf.train.GradientDescentOptimizer(lr),
                                  moving_average=ema)
    weights, biases = slim.get_model_variables()
    assert weights.op.type == ('VarHandleOp' if use_resource else 'VariableV2')
    averages = [ema.average(weights), ema.average(biases)]
    assert all(a is not None for a in averages)
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      history = []
      for _ in range(2):
        sess.run(model.train_op)
        history.append(sess.run([weights, biases] + averages))
  # NumPy: w_{t+1} = w_t - lr grad(w_t); avg_{t+1} = d avg_t + (1 - d) w_{t+1}.
  w, c, avg_w, avg_c = w0, c0, w0, c0
  for got in history:
    _, grad_w, grad_c = numpy_linear(x, y, w, c)
    w, c = w - lr * grad_w, c - lr * grad_c
    avg_w, avg_c = decay * avg_w + (1 - decay) * w, decay * avg_c + (1 - decay) * c
    for actual, expected in zip(got, [w, c, avg_w, avg_c]):
      np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('num_clones', [1, 2])
def test_clip_gradient_norm_bounds_the_update(num_clones):
  x, y, w0, c0 = linear_problem(seed=4)
  y = y + 50.0                     # large residuals: the raw gradient norm is >> clip
  clip = 0.5
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, linear_model_fn_factory(x, y, w0, c0, num_clones),
                                optimizer=tf.train.GradientDescentOptimizer(1.0),
                                clip_gradient_norm=clip)
    weights, biases = slim.get_model_variables()
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(model.train_op)
      w1, c1 = sess.run([weights, biases])
  _, grad_w, grad_c = numpy_linear(x, y, w0, c0)
  raw_norm = np.sqrt(np.sum(grad_w ** 2) + np.sum(grad_c ** 2))
  assert raw_norm > 10 * clip
  change = np.sqrt(np.sum((w1 - w0) ** 2) + np.sum((c1 - c0) ** 2))
  assert change <= clip * (1 + 1e-6)
  np.testing.assert_allclose(change, clip, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(w1, w0 - grad_w * clip / raw_norm, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c1, c0 - grad_c * clip / raw_norm, rtol=1e-5, atol=1e-6)


def test_clip_gradient_norm_leaves_small_gradients_alone():
  x, y, w0, c0 = linear_problem(seed=4)
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, linear_model_fn_factory(x, y, w0, c0, 2),
                                optimizer=tf.train.GradientDescentOptimizer(1.0),
                                clip_gradient_norm=1e6)
    weights, _ = slim.get_model_variables()
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(model.train_op)
      w1 = sess.run(weights)
  np.testing.assert_allclose(w1, w0 - numpy_linear(x, y, w0, c0)[1], rtol=1e-5, atol=1e-6)


def two_layer_net():
  """Two layers in scope 'net' with AUTO_REUSE, so their variables can exist beforehand."""
  with tf.variable_scope('net', reuse=tf.AUTO_REUSE):
    net = slim.fully_connected(tf.constant([[1.0, 2.0, -1.0], [0.5, -0.5, 2.0]]), 4,
                               activation_fn=tf.tanh, scope='fc1')
    return slim.fully_connected(net, 2, activation_fn=None, scope='fc2')


def two_layer_model_fn():
  net = two_layer_net()
  tf.losses.mean_squared_error(tf.ones_like(net), net)
  return net


@pytest.mark.parametrize('train_names', [['net/fc2/weights'],
                                         ['net/fc1/weights', 'net/fc2/biases']])
def test_variables_to_train_restricts_updates(train_names):
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    two_layer_net()      # creates the variables (no loss) so they can be listed
    existing = {v.op.name: v for v in tf.trainable_variables()}
    model = model_deploy.deploy(
        config, two_layer_model_fn, optimizer=tf.train.GradientDescentOptimizer(0.5),
        variables_to_train=[existing[n] for n in train_names])
    assert len(tf.trainable_variables()) == 4
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      before = sess.run(existing)
      sess.run(model.train_op)
      after = sess.run(existing)
  assert sorted(existing) == ['net/fc1/biases', 'net/fc1/weights', 'net/fc2/biases',
                              'net/fc2/weights']
  for name in existing:
    if name in train_names:
      assert not np.allclose(before[name], after[name]), name
    else:
      np.testing.assert_array_equal(before[name], after[name], err_msg=name)


def test_variables_to_train_callable_is_called_after_the_clones():
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    calls = []

    def choose():
      calls.append(len(tf.trainable_variables()))
      return [v for v in tf.trainable_variables() if v.op.name.startswith('net/fc1/')]

    model = model_deploy.deploy(config, two_layer_model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.5),
                                variables_to_train=choose)
    variables = {v.op.name: v for v in tf.trainable_variables()}
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      before = sess.run(variables)
      sess.run(model.train_op)
      after = sess.run(variables)
  assert calls == [4]
  changed = sorted(n for n in variables if not np.array_equal(before[n], after[n]))
  assert changed == ['net/fc1/biases', 'net/fc1/weights']


@pytest.mark.parametrize('empty', [[], ()], ids=['list', 'tuple'])
@pytest.mark.parametrize('as_callable', [False, True])
def test_empty_variables_to_train_is_rejected(empty, as_callable):
  """An empty variables_to_train must not silently train every variable.

  deploy's own error message says 'check ... that variables_to_train is not empty'.
  """
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='variables_to_train'):
      model_deploy.deploy(config, two_layer_model_fn,
                          optimizer=tf.train.GradientDescentOptimizer(0.5),
                          variables_to_train=(lambda: empty) if as_callable else empty)


def test_deploy_creates_and_increments_global_step():
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default():
    model = model_deploy.deploy(config, two_layer_model_fn,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    global_step = tf.train.get_global_step()
    assert global_step is not None
    assert_device(global_step.op.device, '/device:CPU:0')
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(3):
        sess.run(model.train_op)
      assert sess.run(global_step) == 3


def test_deploy_without_any_loss_raises():
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)

  def model_fn():
    return slim.fully_connected(tf.ones([2, 3]), 2)

  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='LOSSES'):
      model_deploy.deploy(config, model_fn, optimizer=tf.train.GradientDescentOptimizer(1.0))
