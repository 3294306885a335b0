"""deployment/model_deploy.py's numerics on logical CPU devices, against NumPy or one
clone: 2 clones of batch b == 1 clone of batch 2b, gradients, regularization counted once,
sparse gradients, batch norm's moving statistics (placement: test_model_deploy.py)."""

import numpy as np
import pytest
from tensorflow.python.client import device_lib

from deployment import model_deploy
from deployment.session import session_config
from tests.deployment.deploy_graphs import (cpu_session, linear_model_fn_factory,
                                           linear_problem, numpy_linear, upstream_ops)
from tf_compat import tf, slim

DeploymentConfig = model_deploy.DeploymentConfig

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
