"""deployment.xla: a jit scope that compiles a model's step, gradients included, and the
count of XLA clusters read from a traced step (checked against the raw step stats); a
narrow I3D's stem and first Inception module train alike with and without it."""

import numpy as np

from deployment import xla
from nets import i3d
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


def _i3d_losses(compile_it, steps=3):
  """(losses of `steps` SGD steps, first step's RunMetadata) of I3D up to Mixed_3b, depth
  0.125, training-mode batch norm, on 2 fixed random clips of 4x32x32; compiled, its
  gradients are built by xla.CompiledGradients as the trainer builds them."""
  with tf.Graph().as_default():
    tf.set_random_seed(2)  # Same ops in the same order: the same initial weights.
    clips = tf.constant(np.random.RandomState(1).uniform(-1, 1, [2, 4, 32, 32, 3]),
                        tf.float32)
    with xla.jit_scope(compile_it), slim.arg_scope(i3d.i3d_arg_scope()):
      net, _ = i3d.i3d_base(clips, final_endpoint='Mixed_3b', depth_multiplier=0.125)
      loss = tf.reduce_mean(tf.square(net - 0.5))
    optimizer = tf.train.GradientDescentOptimizer(0.05)
    if compile_it:
      optimizer = xla.CompiledGradients(optimizer)
    train_op = optimizer.minimize(loss)
    config = xla.session_config(tf.ConfigProto()) if compile_it else None
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      run_metadata = tf.RunMetadata()
      losses = [sess.run([loss, train_op], run_metadata=run_metadata, options=tf.RunOptions(
          trace_level=tf.RunOptions.FULL_TRACE))[0]]
      losses += [sess.run([loss, train_op])[0] for _ in range(steps - 1)]
  return losses, run_metadata


def test_a_narrow_i3d_trunk_trains_alike_compiled():
  """Tolerance: 1e-4 relative per step (XLA reorders float32 sums; batch norm over 2
  clips amplifies that a little)."""
  compiled, run_metadata = _i3d_losses(True)
  plain, _ = _i3d_losses(False)
  np.testing.assert_allclose(compiled, plain, rtol=1e-4)
  assert plain[-1] < plain[0]
  kernels = _raw_kernels(run_metadata)
  assert not [k for k in kernels if 'Conv3D' in k], kernels  # all inside the clusters
  # The step and the batch-norm statistics' update: with the gradients in a scope of
  # their own (or in none), every gradient sum of the module cut a cluster (8 here).
  assert 1 <= kernels.count('_XlaRun') <= 2, kernels
