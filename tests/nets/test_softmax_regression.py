"""nets/softmax_regression.py against NumPy: logits = flatten(images) @ W + b."""

import numpy as np
import pytest

from tf_compat import tf
from nets import nets_factory, softmax_regression


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


def test_logits_are_the_linear_map_of_the_flattened_image(graph):
  images = np.random.RandomState(0).rand(3, 28, 28, 2).astype(np.float32)
  network_fn = nets_factory.get_network_fn('softmax_regression', num_classes=5,
                                           is_training=True)
  logits, end_points = network_fn(tf.constant(images))
  assert sorted(end_points) == ['Flatten', 'Logits', 'Predictions']
  assert [v.op.name for v in tf.trainable_variables()] == [
      'SoftmaxRegression/logits/weights', 'SoftmaxRegression/logits/biases']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.trainable_variables()[1].assign(np.arange(5, dtype=np.float32)))
    got, weights, biases, predictions = sess.run(
        [logits] + tf.trainable_variables() + [end_points['Predictions']])
  assert weights.shape == (28 * 28 * 2, 5)
  expected = images.reshape(3, -1).astype(np.float64) @ weights + biases
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  softmax = np.exp(expected - expected.max(1, keepdims=True))
  np.testing.assert_allclose(predictions, softmax / softmax.sum(1, keepdims=True),
                             rtol=1e-5, atol=1e-6)


def test_base_stops_at_the_flattened_input_and_refuses_other_end_points(graph):
  net, end_points = softmax_regression.softmax_regression_base(tf.zeros([2, 4, 4, 3]))
  assert net.shape.as_list() == [2, 48] and list(end_points) == ['Flatten']
  assert not tf.global_variables()
  with pytest.raises(ValueError, match='valid: Flatten'):
    softmax_regression.softmax_regression_base(tf.zeros([2, 4, 4, 3]), 'Logits')


def test_no_classes_returns_the_features(graph):
  net, _ = nets_factory.get_network_fn('softmax_regression', num_classes=0)(
      tf.zeros([2, 28, 28, 1]))
  assert net.shape.as_list() == [2, 784]
