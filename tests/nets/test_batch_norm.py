"""nets.batch_norm: frozen batch norm while training, on I3D and on LeNet with batch norm.

Each case sets the moving statistics to random values (as a fine-tuning checkpoint would),
trains a few SGD steps through model_deploy and compares with what the session held
before training, and the training graph's outputs with the same net built for inference
(is_training=False, TF-Slim's own inference path) on the same variables.
"""

import numpy as np
import pytest

from deployment import model_deploy
from deployment.session import session_config
from nets import batch_norm, lenet, nets_factory
from tf_compat import tf, slim

NUM_CLASSES = 3
STEPS = 3
CPU = model_deploy.DeploymentConfig(clone_on_cpu=True)

# name -> (network_fn arguments, input shape, the last end point before dropout): built
# through the factory, in the net's own arg scope (I3D's puts batch norm after every
# convolution).
NETS = {
    'i3d': ({'depth_multiplier': 0.125}, [2, 8, 32, 32, 3], 'Mixed_5c'),
    'lenet': ({'use_batch_norm': True}, [4, 28, 28, 1], 'fc3'),
}


def network_fn(net, is_training):
  kwargs, _, _ = NETS[net]
  return nets_factory.get_network_fn(net, NUM_CLASSES, is_training=is_training, **kwargs)


def _kind(name):
  """'moving_mean', 'moving_variance', 'beta', 'gamma', 'weights' or 'other'."""
  for kind in ('moving_mean', 'moving_variance', 'beta', 'gamma'):
    if name.endswith('/' + kind):
      return kind
  return 'weights' if name.endswith('/weights') else 'other'


def _randomize_moving_statistics(rng):
  """One op setting every moving mean/variance to random values."""
  assigns = []
  for variable in tf.global_variables():
    kind = _kind(variable.op.name)
    if kind in ('moving_mean', 'moving_variance'):
      shape = variable.shape.as_list()
      value = (rng.uniform(0.5, 2.0, shape) if kind == 'moving_variance'
               else rng.randn(*shape) * 0.3)
      assigns.append(tf.assign(variable, value.astype(np.float32)))
  return tf.group(*assigns)


def train(net, mode):
  """-> dict: variables before/after STEPS steps (dropout keep 0.5); at the start, the
  last end point before dropout and the logits of the training graph and of the
  inference graph; the update ops and the trainable and model variables."""
  _, shape, features = NETS[net]
  rng = np.random.RandomState(5)
  with tf.Graph().as_default():
    inputs = tf.constant(rng.uniform(-1, 1, shape).astype(np.float32))
    labels = tf.one_hot(np.arange(shape[0]) % NUM_CLASSES, NUM_CLASSES)

    def model_fn():
      logits, end_points = network_fn(net, is_training=True)(
          inputs, dropout_keep_prob=0.5, freeze_batch_norm=mode)
      tf.losses.softmax_cross_entropy(labels, logits)
      return end_points[features], logits

    deployed = model_deploy.deploy(CPU, model_fn,
                                   optimizer=tf.train.GradientDescentOptimizer(0.5))
    with tf.name_scope('inference'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
      inference_logits, end_points = network_fn(net, is_training=False)(inputs)
    variables = {v.op.name: v for v in tf.global_variables() if _kind(v.op.name) != 'other'}
    result = {'update_ops': tf.get_collection(tf.GraphKeys.UPDATE_OPS),
              'trainable': {v.op.name for v in tf.trainable_variables()},
              'model_variables': {v.op.name for v in slim.get_model_variables()}}
    randomize = _randomize_moving_statistics(rng)
    with tf.Session(config=session_config.make_session_config(CPU)) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(randomize)
      result['before'] = sess.run(variables)
      (result['training'], result['inference']) = sess.run(
          [deployed.clones[0].outputs, (end_points[features], inference_logits)])
      for _ in range(STEPS):
        sess.run(deployed.train_op)
      result['after'] = sess.run(variables)
  return result


def _of_kind(values, kind):
  return {name: value for name, value in values.items() if _kind(name) == kind}


def _changed(result, kind):
  before, after = _of_kind(result['before'], kind), _of_kind(result['after'], kind)
  assert before, kind
  return {name for name in before if not np.array_equal(before[name], after[name])}


# I3D (the slow one) in the full freeze only: 'statistics' differs from it by the one
# trainable flag, which LeNet checks.
@pytest.mark.parametrize('net, mode', [('i3d', 'all'), ('lenet', 'statistics'),
                                       ('lenet', 'all')])
def test_frozen_batch_norm_keeps_its_statistics_and_uses_them(net, mode):
  result = train(net, mode)
  assert result['update_ops'] == []
  assert _changed(result, 'moving_mean') == set()
  assert _changed(result, 'moving_variance') == set()
  # Normalised with the moving statistics: up to dropout, the training graph computes
  # the inference graph's features on the same weights ...
  np.testing.assert_allclose(result['training'][0], result['inference'][0],
                             rtol=1e-4, atol=1e-5)
  # ... and dropout still follows is_training: on in the training graph's logits.
  assert not np.allclose(result['training'][1], result['inference'][1],
                         rtol=1e-3, atol=1e-3)
  weights = _of_kind(result['before'], 'weights')
  assert _changed(result, 'weights') == set(weights)        # Everything else trains.
  betas = set(_of_kind(result['before'], 'beta'))
  if mode == batch_norm.STATISTICS:
    assert _changed(result, 'beta') == betas
  else:
    assert _changed(result, 'beta') == set()
    assert not betas & result['trainable']                  # Fixed, ...
    assert betas <= result['model_variables']               # ... and still checkpointed.


def test_unfrozen_batch_norm_trains_its_statistics():
  """The contrast: without freezing, batch statistics normalise and the moving ones move."""
  result = train('lenet', batch_norm.NONE)
  assert result['update_ops']
  assert _changed(result, 'moving_mean') == set(_of_kind(result['before'], 'moving_mean'))
  assert not np.allclose(result['training'][0], result['inference'][0],
                         rtol=1e-3, atol=1e-3)


def test_unknown_mode_is_refused(graph):
  del graph
  with pytest.raises(ValueError, match="freeze_batch_norm='stats' is not known; valid: "
                     'none, statistics, all'):
    lenet.lenet(tf.zeros([1, 28, 28, 1]), use_batch_norm=True, is_training=True,
                freeze_batch_norm='stats')
