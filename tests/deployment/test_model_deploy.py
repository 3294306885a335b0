"""Tests for deployment/model_deploy.py: placement and summaries (DeploymentConfig alone:
test_deployment_config.py; numerics: test_model_deploy_numerics.py; deploy's options:
test_model_deploy_options.py).

Device placement is checked on built graphs for every topology (no GPU and no
cluster needed: graphs that name GPUs or ps jobs are built, never run). Numerical tests run
on logical CPU devices and compare against NumPy or a single-clone run.
"""

import collections

import pytest

from tf_compat import tf, slim
from deployment import model_deploy
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
