"""The network registry and get_network_fn."""

import dataclasses

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import cifarnet
from nets import lenet
from nets import nets_factory

# name -> (image size, channels, weight tensors that carry an L2 regularizer).
BUILTINS = {
    'lenet': (28, 1, ['LeNet/conv1/weights', 'LeNet/conv2/weights',
                      'LeNet/fc3/weights', 'LeNet/fc4/weights']),
    # slim's CifarNet regularises fc3 and fc4 only: not the convs, not the logits.
    'cifarnet': (32, 3, ['CifarNet/fc3/weights', 'CifarNet/fc4/weights']),
    'softmax_regression': (28, 1, ['SoftmaxRegression/logits/weights']),
}


@pytest.fixture
def private_registry(monkeypatch):
  """A copy of the registry, so registrations made by a test do not outlive it."""
  monkeypatch.setattr(nets_factory, '_REGISTRY', dict(nets_factory._REGISTRY))


def _images(name, batch=2):
  size, channels, _ = BUILTINS[name]
  return tf.constant(np.random.RandomState(0).rand(batch, size, size, channels),
                     tf.float32)


def _regularization_values_and_numpy_reference(weight_names, weight_decay):
  """Evaluated REGULARIZATION_LOSSES and 0.5 * wd * sum(w^2) per weight, sorted."""
  by_name = {v.op.name: v for v in tf.global_variables()}
  losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss_values, weights = sess.run(
        (losses, [by_name[name] for name in weight_names]))
  reference = [0.5 * weight_decay * np.sum(w.astype(np.float64) ** 2) for w in weights]
  return sorted(loss_values), sorted(reference)


def test_builtin_specs():
  lenet_spec = nets_factory.get_network_spec('lenet')
  assert (lenet_spec.net_fn, lenet_spec.arg_scope_fn) == (lenet.lenet,
                                                           lenet.lenet_arg_scope)
  assert (lenet_spec.default_image_size, lenet_spec.default_weight_decay,
          lenet_spec.preprocessing_name, lenet_spec.default_num_frames) == (
              28, 0.0, 'lenet', None)
  cifar_spec = nets_factory.get_network_spec('cifarnet')
  assert (cifar_spec.net_fn, cifar_spec.arg_scope_fn) == (cifarnet.cifarnet,
                                                           cifarnet.cifarnet_arg_scope)
  assert (cifar_spec.default_image_size, cifar_spec.default_weight_decay,
          cifar_spec.preprocessing_name, cifar_spec.default_num_frames) == (
              32, 0.004, 'cifarnet', None)


def test_list_networks_is_sorted_and_holds_the_builtins():
  names = nets_factory.list_networks()
  assert names == sorted(names)
  assert {'cifarnet', 'lenet'} <= set(names)


@pytest.mark.parametrize('lookup', [
    nets_factory.get_network_spec,
    lambda name: nets_factory.get_network_fn(name, num_classes=10),
])
def test_unknown_name_lists_valid_names(lookup):
  with pytest.raises(ValueError) as error:
    lookup('lenet5')
  message = str(error.value)
  assert "'lenet5'" in message
  assert ', '.join(nets_factory.list_networks()) in message
  assert 'cifarnet' in message and 'lenet' in message


def test_duplicate_registration_raises(private_registry):
  before = nets_factory.list_networks()
  spec = nets_factory.get_network_spec('lenet')
  with pytest.raises(ValueError, match="'lenet' is already registered"):
    nets_factory.register_network(spec)
  with pytest.raises(ValueError, match="'lenet' is already registered"):
    nets_factory.register_network(dataclasses.replace(spec, preprocessing_name='x'))
  assert nets_factory.list_networks() == before
  assert nets_factory.get_network_spec('lenet') is spec


def test_register_network_rejects_non_specs():
  with pytest.raises(TypeError, match='NetworkSpec'):
    nets_factory.register_network({'name': 'lenet'})


def test_spec_is_frozen():
  spec = nets_factory.get_network_spec('lenet')
  with pytest.raises(dataclasses.FrozenInstanceError):
    spec.default_weight_decay = 4e-5


@pytest.mark.parametrize('change, message', [
    ({'default_weight_decay': 4e-5}, 'default_weight_decay=4e-05 but arg_scope_fn '
                                     'defaults to 0.0'),
    ({'default_image_size': 32}, 'default_image_size=32 but net_fn'),
    ({'default_image_size': 0}, 'default_image_size must be a positive int'),
    ({'default_weight_decay': -1.0}, 'default_weight_decay must be a number >= 0'),
    ({'default_num_frames': 0}, 'default_num_frames must be None or a positive int'),
    ({'name': ''}, 'name must be a non-empty string'),
    ({'preprocessing_name': None}, 'preprocessing_name must be a non-empty string'),
    ({'net_fn': None}, 'net_fn must be callable'),
])
def test_spec_rejects_inconsistent_fields(change, message):
  spec = nets_factory.get_network_spec('lenet')
  with pytest.raises(ValueError, match=message):
    dataclasses.replace(spec, **change)


def test_network_fn_attributes():
  network_fn = nets_factory.get_network_fn('cifarnet', num_classes=10)
  assert network_fn.default_image_size == 32
  assert network_fn.spec is nets_factory.get_network_spec('cifarnet')
  assert network_fn.weight_decay == 0.004


def test_default_weight_decay_is_lenets_own_zero(graph):
  network_fn = nets_factory.get_network_fn('lenet', num_classes=10)
  assert network_fn.weight_decay == 0.0
  network_fn(_images('lenet'))
  # slim.l2_regularizer(0.0) is a no-op regularizer: nothing is collected.
  assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == []


def test_default_weight_decay_is_cifarnets_own(graph):
  network_fn = nets_factory.get_network_fn('cifarnet', num_classes=10)
  network_fn(_images('cifarnet'))
  losses, reference = _regularization_values_and_numpy_reference(
      BUILTINS['cifarnet'][2], 0.004)
  np.testing.assert_allclose(losses, reference, rtol=1e-5)


@pytest.mark.parametrize('name, weight_decay', [('lenet', 1e-3), ('cifarnet', 0.01)])
def test_explicit_weight_decay_is_applied(graph, name, weight_decay):
  network_fn = nets_factory.get_network_fn(name, num_classes=10,
                                           weight_decay=weight_decay)
  network_fn(_images(name))
  losses, reference = _regularization_values_and_numpy_reference(
      BUILTINS[name][2], weight_decay)
  assert len(losses) == len(BUILTINS[name][2])
  np.testing.assert_allclose(losses, reference, rtol=1e-5)


def test_integer_zero_weight_decay_is_accepted(graph):
  # slim.l2_regularizer(0) raises on ints; the factory passes floats.
  network_fn = nets_factory.get_network_fn('cifarnet', num_classes=10, weight_decay=0)
  network_fn(_images('cifarnet'))
  assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == []


@pytest.mark.parametrize('weight_decay', [-1e-4, '4e-5', True])
def test_bad_weight_decay_is_refused(weight_decay):
  with pytest.raises(ValueError, match='weight_decay must be None or a number >= 0'):
    nets_factory.get_network_fn('lenet', num_classes=10, weight_decay=weight_decay)


@pytest.mark.parametrize('num_classes', [-1, 2.5, '10'])
def test_bad_num_classes_is_refused(num_classes):
  with pytest.raises(ValueError, match='num_classes must be None or an int >= 0'):
    nets_factory.get_network_fn('lenet', num_classes=num_classes)


def test_unknown_net_kwarg_is_refused_before_building():
  with pytest.raises(ValueError, match="'cifarnet' does not take use_batch_norm; it "
                                       'takes: dropout_keep_prob, prediction_fn, scope'):
    nets_factory.get_network_fn('cifarnet', num_classes=10, use_batch_norm=True)


def test_net_kwargs_reach_the_net(graph):
  network_fn = nets_factory.get_network_fn('lenet', num_classes=10, is_training=True,
                                           use_batch_norm=True)
  network_fn(_images('lenet'))
  assert 'LeNet/fc3/BatchNorm/moving_mean' in {v.op.name for v in tf.global_variables()}
  assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 6


def test_call_kwargs_override_net_kwargs(graph):
  network_fn = nets_factory.get_network_fn('lenet', num_classes=10, scope='First')
  network_fn(_images('lenet'), scope='Second')
  assert {v.op.name.split('/')[0] for v in tf.global_variables()} == {'Second'}


@pytest.mark.parametrize('name', sorted(set(BUILTINS) - {'softmax_regression'}))  # Dropout.
@pytest.mark.parametrize('is_training, keep_prob, runs_differ', [
    (True, 0.5, True),     # dropout draws a new mask per run
    (True, 1.0, False),    # forwarded dropout_keep_prob=1.0 keeps everything
    (False, 0.5, False),   # eval: dropout is the identity
])
def test_forward_pass_and_is_training(graph, name, is_training, keep_prob, runs_differ):
  network_fn = nets_factory.get_network_fn(name, num_classes=7, is_training=is_training,
                                           dropout_keep_prob=keep_prob)
  logits, end_points = network_fn(_images(name, batch=3))
  assert end_points['Predictions'].shape.as_list() == [3, 7]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first, second = sess.run(logits), sess.run(logits)
  assert first.shape == (3, 7)
  assert (not np.array_equal(first, second)) == runs_differ


# A stand-in video net: 5-D clips and a tiny own weight decay, the I3D situation.
def _toy_video_arg_scope(weight_decay=1e-7):
  with slim.arg_scope([slim.conv3d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(weight_decay)) as scope:
    return scope


def _toy_video_net(clips, num_classes=5, is_training=False, scope='ToyVideo'):
  """clips [batch, frames, size, size, 3] -> logits [batch, num_classes]."""
  del is_training  # no dropout or batch norm in this toy
  with tf.variable_scope(scope, 'ToyVideo', [clips]):
    net = slim.conv3d(clips, 4, [1, 3, 3], scope='conv')
    net = tf.reduce_mean(net, axis=[1, 2, 3])
    logits = slim.fully_connected(net, num_classes, activation_fn=None, scope='logits')
  return logits, {'Logits': logits}


_toy_video_net.default_image_size = 16


def test_video_net_registers_with_its_own_weight_decay(graph, private_registry):
  nets_factory.register_network(nets_factory.NetworkSpec(
      name='toy_video', net_fn=_toy_video_net, arg_scope_fn=_toy_video_arg_scope,
      default_image_size=16, default_weight_decay=1e-7, preprocessing_name='toy',
      default_num_frames=4))
  assert 'toy_video' in nets_factory.list_networks()
  network_fn = nets_factory.get_network_fn('toy_video', num_classes=5)
  spec = network_fn.spec
  clips = tf.random.uniform([2, spec.default_num_frames, spec.default_image_size,
                             spec.default_image_size, 3])
  logits, _ = network_fn(clips)
  assert logits.shape.as_list() == [2, 5]
  assert network_fn.weight_decay == 1e-7  # not slim's forced 4e-5
  losses, reference = _regularization_values_and_numpy_reference(
      ['ToyVideo/conv/weights', 'ToyVideo/logits/weights'], 1e-7)
  np.testing.assert_allclose(losses, reference, rtol=1e-5)


@pytest.mark.parametrize('decay', [None, 0.9])
def test_batch_norm_decay_reaches_the_moving_statistics(decay):
  """One training-mode update: moving_mean = decay * 0 + (1 - decay) * batch mean."""
  images = np.random.RandomState(1).rand(4, 28, 28, 1).astype(np.float32)
  with tf.Graph().as_default():
    network_fn = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                             batch_norm_decay=decay, use_batch_norm=True)
    network_fn(tf.constant(images))
    mean = [v for v in tf.global_variables()
            if v.op.name == 'LeNet/conv1/BatchNorm/moving_mean'][0]
    weights = [v for v in tf.global_variables() if v.op.name == 'LeNet/conv1/weights'][0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      kernel = sess.run(weights)
      sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
      moving = sess.run(mean)
  # conv1 is SAME 5x5 without bias before batch norm: its batch mean, in NumPy.
  padded = np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0)))
  windows = np.lib.stride_tricks.sliding_window_view(padded, (5, 5), axis=(1, 2))
  conv = np.einsum('bhwcij,ijco->bhwo', windows, kernel)
  expected = (1 - (0.999 if decay is None else decay)) * conv.mean(axis=(0, 1, 2))
  np.testing.assert_allclose(moving, expected, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize('name, decay, message', [
    ('cifarnet', 0.9, "network 'cifarnet' has no batch_norm_decay"),
    ('lenet', 1.0, r'batch_norm_decay must be in \(0, 1\), got 1.0'),
])
def test_bad_batch_norm_decay(name, decay, message):
  with pytest.raises(ValueError, match=message):
    nets_factory.get_network_fn(name, 10, batch_norm_decay=decay)
