"""Graph helpers the model_deploy tests share (tests/deployment/test_model_deploy*.py)."""

import numpy as np

from deployment.session import session_config
from tf_compat import tf, slim


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
