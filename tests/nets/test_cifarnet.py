"""CifarNet: shapes, parameter count, slim variable names, regularised layers, dropout."""

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import cifarnet

BATCH = 2
SIZE = 32
NUM_CLASSES = 10


def _build(num_classes=NUM_CLASSES, **kwargs):
  images = tf.random.uniform([BATCH, SIZE, SIZE, 3])
  with slim.arg_scope(cifarnet.cifarnet_arg_scope()):
    return cifarnet.cifarnet(images, num_classes=num_classes, **kwargs)


def test_default_image_size():
  assert cifarnet.cifarnet.default_image_size == 32


def test_end_point_shapes(graph):
  logits, end_points = _build()
  expected = {
      'conv1': [BATCH, 32, 32, 64],   # SAME 5x5 conv keeps 32x32
      'pool1': [BATCH, 16, 16, 64],   # 2x2 VALID pool, stride 2
      'norm1': [BATCH, 16, 16, 64],
      'conv2': [BATCH, 16, 16, 64],
      'norm2': [BATCH, 16, 16, 64],
      'pool2': [BATCH, 8, 8, 64],
      'Flatten': [BATCH, 8 * 8 * 64],
      'fc3': [BATCH, 384],
      'dropout3': [BATCH, 384],
      'fc4': [BATCH, 192],
      'Logits': [BATCH, NUM_CLASSES],
      'Predictions': [BATCH, NUM_CLASSES],
  }
  assert {name: t.shape.as_list() for name, t in end_points.items()} == expected
  assert logits is end_points['Logits']


@pytest.mark.parametrize('num_classes', [None, 0])
def test_no_classes_returns_fc4_features(graph, num_classes):
  net, end_points = _build(num_classes=num_classes)
  assert net.shape.as_list() == [BATCH, 192]
  assert net is end_points['fc4']
  assert not {'Logits', 'Predictions'} & set(end_points)
  assert not [v for v in tf.global_variables() if '/logits/' in v.op.name]


def test_trainable_parameter_count(graph):
  _build()
  conv1 = 5 * 5 * 3 * 64 + 64
  conv2 = 5 * 5 * 64 * 64 + 64
  fc3 = (8 * 8 * 64) * 384 + 384
  fc4 = 384 * 192 + 192
  logits = 192 * NUM_CLASSES + NUM_CLASSES
  count = sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())
  assert count == conv1 + conv2 + fc3 + fc4 + logits


def test_variable_names_match_slim(graph):
  _build()
  names = [v.op.name for v in tf.global_variables()]
  assert names == [
      'CifarNet/conv1/weights', 'CifarNet/conv1/biases',
      'CifarNet/conv2/weights', 'CifarNet/conv2/biases',
      'CifarNet/fc3/weights', 'CifarNet/fc3/biases',
      'CifarNet/fc4/weights', 'CifarNet/fc4/biases',
      'CifarNet/logits/weights', 'CifarNet/logits/biases',
  ]


def test_only_fc3_and_fc4_weights_are_regularised(graph):
  _build()
  losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  assert sorted(loss.op.name for loss in losses) == [
      'CifarNet/fc3/kernel/Regularizer/l2_regularizer',
      'CifarNet/fc4/kernel/Regularizer/l2_regularizer',
  ]


def test_op_names_match_slim(graph):
  _, end_points = _build()
  # No nested 'CifarNet/CifarNet/' although cifarnet_base re-enters the scope.
  assert end_points['conv1'].op.name == 'CifarNet/conv1/Relu'
  assert end_points['fc4'].op.name == 'CifarNet/fc4/Relu'
  assert end_points['Logits'].op.name == 'CifarNet/logits/BiasAdd'
  assert end_points['Predictions'].op.name.startswith('CifarNet/Predictions/')


def test_base_stops_at_final_endpoint(graph):
  images = tf.zeros([BATCH, SIZE, SIZE, 3])
  net, end_points = cifarnet.cifarnet_base(images, final_endpoint='norm2')
  assert net.shape.as_list() == [BATCH, 16, 16, 64]
  assert list(end_points) == ['conv1', 'pool1', 'norm1', 'conv2', 'norm2']
  assert [v.op.name for v in tf.trainable_variables()][-1] == 'CifarNet/conv2/biases'


def test_base_rejects_unknown_final_endpoint(graph):
  with pytest.raises(ValueError, match="'logits'.*valid: conv1, pool1, norm1, "):
    cifarnet.cifarnet_base(tf.zeros([BATCH, SIZE, SIZE, 3]), final_endpoint='logits')
  assert tf.global_variables() == []


@pytest.mark.parametrize('is_training', [True, False])
def test_forward_pass_and_dropout(graph, is_training):
  images = tf.constant(np.random.RandomState(0).rand(3, SIZE, SIZE, 3), tf.float32)
  with slim.arg_scope(cifarnet.cifarnet_arg_scope()):
    logits, _ = cifarnet.cifarnet(images, NUM_CLASSES, is_training=is_training)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first, second = sess.run(logits), sess.run(logits)
  assert first.shape == (3, NUM_CLASSES)
  assert np.array_equal(first, second) != is_training
