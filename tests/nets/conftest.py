"""Shared fixtures for the network tests: every test builds in its own graph; a random 2-D
Inception-v1 checkpoint for the inflation tests (library and tool)."""

import numpy as np
import pytest
from tf_slim.nets import inception_v1

from tf_compat import tf, slim


@pytest.fixture
def graph():
  """A fresh default graph, so variables and collections never leak across tests."""
  with tf.Graph().as_default() as g:
    yield g


def _he_values(variables, rng):
  values = {}
  for v in variables:
    shape = v.shape.as_list()
    if v.op.name.endswith('moving_variance'):
      values[v] = rng.uniform(0.5, 2.0, shape)
    elif v.op.name.endswith('/weights'):
      values[v] = rng.randn(*shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
    else:  # beta, moving_mean, biases
      values[v] = rng.randn(*shape) * 0.2
  return {v: value.astype(np.float32) for v, value in values.items()}


def _assign(sess, values):
  holders = {v: tf.placeholder(v.dtype.base_dtype, v.shape) for v in values}
  sess.run([tf.assign(v, holders[v]) for v in values],
           {holders[v]: value for v, value in values.items()})


@pytest.fixture(scope='module')
def checkpoint_2d(tmp_path_factory):
  """(prefix, name -> value) of a random tf_slim Inception-v1 with 1001 classes."""
  prefix = str(tmp_path_factory.mktemp('inception_v1') / 'model.ckpt')
  with tf.Graph().as_default():
    with slim.arg_scope(inception_v1.inception_v1_arg_scope()):
      inception_v1.inception_v1(tf.zeros([1, 224, 224, 3]), num_classes=1001,
                                is_training=False)
    values = _he_values(tf.global_variables(), np.random.RandomState(0))
    with tf.Session() as sess:
      _assign(sess, values)
      tf.train.Saver().save(sess, prefix, write_meta_graph=False, write_state=False)
  return prefix, {v.op.name: value for v, value in values.items()}
