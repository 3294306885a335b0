"""deployment/model_deploy.py's deploy options: no optimizer, moving averages, gradient
clipping, variables_to_train, the global step, a model without a loss."""

import numpy as np
import pytest

from deployment import model_deploy
from tests.deployment.deploy_graphs import (cpu_session, linear_model_fn_factory,
                                           linear_problem, numpy_linear)
from tests.deployment.test_deployment_config import assert_device
from tf_compat import tf, slim

DeploymentConfig = model_deploy.DeploymentConfig

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
