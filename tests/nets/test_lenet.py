"""LeNet: shapes, parameter count, slim variable names, batch norm, dropout."""

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import lenet

BATCH = 2
SIZE = 28
NUM_CLASSES = 10


def _build(channels=1, num_classes=NUM_CLASSES, **kwargs):
  images = tf.random.uniform([BATCH, SIZE, SIZE, channels])
  with slim.arg_scope(lenet.lenet_arg_scope()):
    return lenet.lenet(images, num_classes=num_classes, **kwargs)


def _trainable_count():
  return sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())


def test_default_image_size():
  assert lenet.lenet.default_image_size == 28


@pytest.mark.parametrize('channels', [1, 3])
def test_end_point_shapes(graph, channels):
  logits, end_points = _build(channels)
  expected = {
      'conv1': [BATCH, 28, 28, 32],   # SAME 5x5 conv keeps 28x28
      'pool1': [BATCH, 14, 14, 32],
      'conv2': [BATCH, 14, 14, 64],
      'pool2': [BATCH, 7, 7, 64],
      'Flatten': [BATCH, 7 * 7 * 64],
      'fc3': [BATCH, 1024],
      'dropout3': [BATCH, 1024],
      'Logits': [BATCH, NUM_CLASSES],
      'Predictions': [BATCH, NUM_CLASSES],
  }
  assert {name: t.shape.as_list() for name, t in end_points.items()} == expected
  assert logits is end_points['Logits']


@pytest.mark.parametrize('num_classes', [None, 0])
def test_no_classes_returns_fc3_features(graph, num_classes):
  net, end_points = _build(num_classes=num_classes)
  assert net.shape.as_list() == [BATCH, 1024]
  assert net is end_points['fc3']
  assert not {'dropout3', 'Logits', 'Predictions'} & set(end_points)
  assert not [v for v in tf.global_variables() if '/fc4/' in v.op.name]


@pytest.mark.parametrize('channels', [1, 3])
def test_trainable_parameter_count(graph, channels):
  _build(channels)
  conv1 = 5 * 5 * channels * 32 + 32
  conv2 = 5 * 5 * 32 * 64 + 64
  fc3 = (7 * 7 * 64) * 1024 + 1024
  fc4 = 1024 * NUM_CLASSES + NUM_CLASSES
  assert _trainable_count() == conv1 + conv2 + fc3 + fc4


def test_variable_names_match_slim(graph):
  _build()
  names = [v.op.name for v in tf.global_variables()]
  assert names == [
      'LeNet/conv1/weights', 'LeNet/conv1/biases',
      'LeNet/conv2/weights', 'LeNet/conv2/biases',
      'LeNet/fc3/weights', 'LeNet/fc3/biases',
      'LeNet/fc4/weights', 'LeNet/fc4/biases',
  ]


def test_op_names_match_slim(graph):
  _, end_points = _build()
  # No nested 'LeNet/LeNet/' although lenet_base re-enters the scope.
  assert end_points['conv1'].op.name == 'LeNet/conv1/Relu'
  assert end_points['fc3'].op.name == 'LeNet/fc3/Relu'
  assert end_points['Logits'].op.name == 'LeNet/fc4/BiasAdd'
  # slim builds Predictions outside the LeNet scope.
  assert end_points['Predictions'].op.name.startswith('Predictions/')


def test_clones_share_variables_and_keep_update_ops_apart(graph):
  images = tf.zeros([BATCH, SIZE, SIZE, 1])
  for clone in range(2):
    # How a second clone reuses the first clone's variables in its own name scope.
    with (tf.name_scope(f'clone_{clone}'),
          tf.variable_scope(tf.get_variable_scope(), reuse=True if clone else None)):
      lenet.lenet(images, use_batch_norm=True, is_training=True)
  assert len(tf.global_variables()) == 14  # one set: 3 x (weights + 3 BN) + fc4 (2)
  for clone in range(2):
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS, f'clone_{clone}/')) == 6


def test_batch_norm_adds_moving_statistics_and_update_ops(graph):
  _build(use_batch_norm=True, is_training=True)
  names = {v.op.name for v in tf.global_variables()}
  for layer in ('conv1', 'conv2', 'fc3'):
    for var in ('beta', 'moving_mean', 'moving_variance'):
      assert f'LeNet/{layer}/BatchNorm/{var}' in names
    # A normalizer replaces the layer's biases (beta plays their part).
    assert f'LeNet/{layer}/biases' not in names
  assert 'LeNet/fc4/biases' in names
  assert not [n for n in names if n.startswith('LeNet/fc4/BatchNorm')]
  # One mean and one variance update per normalised layer.
  assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 6
  betas = 32 + 64 + 1024
  weights = 5 * 5 * 1 * 32 + 5 * 5 * 32 * 64 + 7 * 7 * 64 * 1024 + 1024 * NUM_CLASSES
  assert _trainable_count() == weights + betas + NUM_CLASSES


def test_batch_norm_in_eval_mode_has_no_update_ops(graph):
  _build(use_batch_norm=True, is_training=False)
  assert [v for v in tf.global_variables() if 'moving_mean' in v.op.name]
  assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []


def test_without_batch_norm_no_statistics_or_update_ops(graph):
  _build(is_training=True)
  assert not [v for v in tf.global_variables() if 'BatchNorm' in v.op.name]
  assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []


def test_batch_norm_update_ops_move_the_moving_means(graph):
  _build(use_batch_norm=True, is_training=True)
  moving_means = [v for v in tf.global_variables() if 'moving_mean' in v.op.name]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    for value in sess.run(moving_means):
      assert np.any(value != 0.0)  # initialised to zeros


def test_base_stops_at_final_endpoint(graph):
  images = tf.zeros([BATCH, SIZE, SIZE, 1])
  net, end_points = lenet.lenet_base(images, final_endpoint='pool2')
  assert net.shape.as_list() == [BATCH, 7, 7, 64]
  assert list(end_points) == ['conv1', 'pool1', 'conv2', 'pool2']
  assert [v.op.name for v in tf.trainable_variables()][-1] == 'LeNet/conv2/biases'


def test_base_rejects_unknown_final_endpoint(graph):
  with pytest.raises(ValueError, match='Logits.*valid: conv1, pool1, conv2, pool2, '
                                       'Flatten, fc3'):
    lenet.lenet_base(tf.zeros([BATCH, SIZE, SIZE, 1]), final_endpoint='Logits')
  assert tf.global_variables() == []  # checked before building anything


@pytest.mark.parametrize('is_training', [True, False])
def test_forward_pass_and_dropout(graph, is_training):
  images = tf.constant(np.random.RandomState(0).rand(3, SIZE, SIZE, 1), tf.float32)
  with slim.arg_scope(lenet.lenet_arg_scope()):
    logits, _ = lenet.lenet(images, NUM_CLASSES, is_training=is_training)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first, second = sess.run(logits), sess.run(logits)
  assert first.shape == (3, NUM_CLASSES)
  # Dropout draws a new mask per run while training and is the identity in eval.
  assert np.array_equal(first, second) != is_training
