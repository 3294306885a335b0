"""Tests for tf_compat.py: graph mode, tf-slim's batch norm on TF 2.21, quiet import."""

import os
import subprocess
import sys

import numpy as np

from tf_compat import tf, slim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPSILON = 0.001  # slim.batch_norm's default
DECAY = 0.999    # slim.batch_norm's default


def test_graph_mode():
  assert tf.executing_eagerly() is False
  assert tf.__name__.startswith('tensorflow') and hasattr(tf, 'Session')
  assert hasattr(slim, 'batch_norm') and hasattr(slim, 'learning')


def test_ops_tensor_alias():
  from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
  assert ops.Tensor is tf.Tensor


def numpy_batch_norm(x, axes):
  mean = x.mean(axis=axes)
  variance = x.var(axis=axes)  # biased, as batch norm normalises with
  return (x - mean) / np.sqrt(variance + EPSILON), mean


def test_batch_norm_5d_training_then_inference():
  """The regression: slim.batch_norm on 5-D input needs tf_keras.legacy_tf_layers."""
  rng = np.random.RandomState(0)
  data = (rng.randn(2, 4, 8, 8, 3) * [1.0, 2.0, 0.5] + [0.5, -1.0, 3.0]).astype(np.float32)
  with tf.Graph().as_default():
    inputs = tf.constant(data)
    with tf.variable_scope('bn'):
      train_out = slim.batch_norm(inputs, is_training=True)
    with tf.variable_scope('bn', reuse=True):
      infer_out = slim.batch_norm(inputs, is_training=False)
    assert train_out.shape.as_list() == [2, 4, 8, 8, 3]
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert update_ops  # moving statistics are updated through UPDATE_OPS by default
    moving_mean = slim.get_variables_by_name('moving_mean')
    moving_variance = slim.get_variables_by_name('moving_variance')
    assert len(moving_mean) == len(moving_variance) == 1
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      initial = sess.run(infer_out)
      got = sess.run(train_out)
      sess.run(update_ops)
      mean_after, variance_after = sess.run([moving_mean[0], moving_variance[0]])
      after = sess.run(infer_out)
  expected, batch_mean = numpy_batch_norm(data.astype(np.float64), (0, 1, 2, 3))
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(got.mean(axis=(0, 1, 2, 3)), 0.0, atol=1e-4)
  # Inference before any update: moving mean 0, moving variance 1, beta 0.
  np.testing.assert_allclose(initial, data / np.sqrt(1.0 + EPSILON), rtol=1e-5, atol=1e-6)
  # One update moves the mean by (1 - decay) towards the batch mean.
  np.testing.assert_allclose(mean_after, (1 - DECAY) * batch_mean, rtol=1e-4, atol=1e-7)
  # Inference uses the moving statistics, whatever variance estimator updated them.
  np.testing.assert_allclose(
      after, (data - mean_after) / np.sqrt(variance_after + EPSILON), rtol=1e-4, atol=1e-5)


def test_batch_norm_2d_with_in_place_updates():
  """updates_collections=None runs the update in the forward pass (uses ops.Tensor)."""
  rng = np.random.RandomState(1)
  data = (rng.randn(16, 5) * 3.0 + 2.0).astype(np.float32)
  with tf.Graph().as_default():
    out = slim.batch_norm(tf.constant(data), is_training=True, updates_collections=None,
                          scale=True)
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    moving_mean = slim.get_variables_by_name('moving_mean')[0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      got = sess.run(out)
      mean_after = sess.run(moving_mean)
  expected, batch_mean = numpy_batch_norm(data.astype(np.float64), (0,))
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(mean_after, (1 - DECAY) * batch_mean, rtol=1e-4, atol=1e-7)


def quiet_env():
  env = dict(os.environ)
  for name in ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS'):
    env.pop(name, None)
  env['PYTHONPATH'] = ROOT
  return env


def test_import_prints_nothing_and_leaves_scikit_learn_out_and_importable():
  """A fresh interpreter's `import tf_compat` prints nothing, in the user's environment (no
  variable hiding TensorFlow's notices). tf-slim would import sklearn.metrics (and SciPy's
  statistics) at start-up: about 1 s of every process here. Hidden only during the import:
  sklearn still imports after. One process for both: what is printed is exactly what the
  script prints after the import."""
  result = subprocess.run([sys.executable, '-c', (
      'import sys, tf_compat\n'
      'print([m for m in sys.modules if m.startswith(("sklearn", "scipy.stats"))])\n'
      'import sklearn.metrics\n'
      'print(tf_compat.slim.losses.metric_learning.HAS_SKLEARN)')],
                          cwd=ROOT, env=quiet_env(), capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == ['[]', 'False']
  assert result.stderr == ''
