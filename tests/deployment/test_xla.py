"""deployment.xla: a jit scope that compiles a model's step, gradients included, and the
count of XLA clusters read from a traced step (checked against the raw step stats)."""

import numpy as np

from deployment import xla
from tf_compat import tf, slim


def _traced_train_step(compile_it):
  """(graph, run metadata, loss) of one SGD step of a 2-layer net, its forward pass and
  loss built in xla.jit_scope(compile_it)."""
  graph = tf.Graph()
  with graph.as_default():
    inputs = tf.constant(np.random.RandomState(0).uniform(-1, 1, [8, 16]), tf.float32)
    with xla.jit_scope(compile_it):
      hidden = slim.fully_connected(inputs, 32, scope='hidden',
                                    weights_initializer=tf.constant_initializer(0.05))
      loss = tf.reduce_mean(tf.square(slim.fully_connected(
          hidden, 4, activation_fn=None, scope='out',
          weights_initializer=tf.constant_initializer(0.1))))
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      run_metadata = tf.RunMetadata()
      value, _ = sess.run([loss, train_op], run_metadata=run_metadata, options=tf.RunOptions(
          trace_level=tf.RunOptions.FULL_TRACE))
  return graph, run_metadata, value


def _raw_kernels(run_metadata):
  return [node.timeline_label.split(' = ')[-1].split('(')[0]
          for device in run_metadata.step_stats.dev_stats for node in device.node_stats]


def test_the_scope_compiles_the_forward_and_backward_pass_and_the_trace_shows_it():
  graph, run_metadata, loss = _traced_train_step(True)
  marked = [op for op in graph.get_operations()
            if op.node_def.attr['_XlaCompile'].b]
  assert any(op.name.startswith('gradients/') for op in marked)  # the backward pass too
  kernels = _raw_kernels(run_metadata)
  counts = xla.xla_clusters(run_metadata)
  assert counts['_XlaCompile'] == kernels.count('_XlaCompile') >= 1
  assert counts['_XlaRun'] == kernels.count('_XlaRun') >= 1
  assert xla.describe_xla(counts) == '%d XLA cluster(s) compiled, %d run' % (
      counts['_XlaCompile'], counts['_XlaRun'])
  _, _, plain_loss = _traced_train_step(False)
  np.testing.assert_allclose(loss, plain_loss, rtol=1e-5)


def test_without_the_scope_nothing_is_compiled():
  graph, run_metadata, _ = _traced_train_step(False)
  assert not any(op.node_def.attr['_XlaCompile'].b for op in graph.get_operations())
  assert xla.xla_clusters(run_metadata) == {}
  assert xla.describe_xla({}) == 'no XLA cluster ran'
