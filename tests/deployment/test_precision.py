"""deployment.precision: float32 variables under the float32 names, half-precision compute
shown by the executed kernels, and the kernels TensorFlow's CPU build lacks.

References: a float32 build of the same network (names, shapes), the raw step stats of
a traced run read here (kernel labels and DataType enums, not through the module), and
TensorFlow itself refusing to run an op without a kernel.
"""

import numpy as np
import pytest

from core.errors import ConfigError
from deployment import precision
from nets import nets_factory
from tf_compat import tf, slim

DT_HALF, DT_FLOAT = 19, 1  # tensorflow/core/framework/types.proto


def _build_lenet(mixed_precision, **kwargs):
  """(graph, loss, logits, end_points) of LeNet on a fixed batch, in a graph of its own."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(1)
    network_fn = precision.network_in_precision(
        nets_factory.get_network_fn('lenet', num_classes=10, is_training=True, **kwargs),
        mixed_precision)
    # One image: the float16 step runs convolution gradients, slow kernels on some CPUs
    # (oneDNN's with AVX-512 FP16: about 0.5 s by issue 38's 52 s for 64x the work).
    images = tf.constant(np.random.RandomState(0).uniform(-1, 1, [1, 28, 28, 1]),
                         tf.float32)
    logits, end_points = network_fn(images)
    loss = tf.reduce_mean(tf.square(logits))
  return graph, loss, logits, end_points


def _variables(graph):
  return {v.op.name: (v.shape.as_list(), v.dtype.base_dtype)
          for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}


@pytest.mark.parametrize('mixed_precision, use_batch_norm', [('float16', False),
                                                            ('bfloat16', True)])
def test_variables_have_the_float32_names_shapes_and_dtype(mixed_precision, use_batch_norm):
  reference = _variables(_build_lenet('float32', use_batch_norm=use_batch_norm)[0])
  graph, _, logits, end_points = _build_lenet(mixed_precision, use_batch_norm=use_batch_norm)
  assert _variables(graph) == reference
  assert all(dtype == tf.float32 for _, dtype in reference.values())
  assert logits.dtype == tf.float32
  assert {t.dtype for t in end_points.values()} == {tf.float32}
  conv = graph.get_operation_by_name('LeNet/conv1/Conv2D')
  assert conv.get_attr('T') == precision.compute_dtype(mixed_precision)


def test_batch_norm_statistics_update_in_float32():
  graph, loss, _, _ = _build_lenet('bfloat16', use_batch_norm=True)
  with graph.as_default(), tf.Session() as sess:
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    mean = [v for v in tf.global_variables() if v.op.name == 'LeNet/conv1/BatchNorm/moving_mean']
    sess.run(tf.global_variables_initializer())
    before = sess.run(mean[0])
    sess.run([loss] + updates)
    after = sess.run(mean[0])
  assert len(updates) == 6 and after.dtype == np.float32
  assert np.all(np.isfinite(after)) and not np.array_equal(before, after)


def test_weight_decay_is_computed_in_float32_on_the_float32_weights():
  """slim's layers regularize what the getter returns (the float16 cast); the losses
  and their gradients must be a float32 run's: 0.004 * |w|^2 / 2 and 0.004 * w."""
  graph, _, _, _ = _build_lenet('float16', weight_decay=0.004)
  with graph.as_default(), tf.Session() as sess:
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    weights = [v for v in tf.trainable_variables() if v.op.name.endswith('weights')]
    gradients = tf.gradients(tf.add_n(losses), weights)
    sess.run(tf.global_variables_initializer())
    loss_values, weight_values, gradient_values = sess.run([losses, weights, gradients])
  assert [loss.dtype for loss in losses] == [tf.float32] * 4
  np.testing.assert_allclose(sorted(loss_values),
                             sorted(0.004 * np.sum(np.square(w)) / 2 for w in weight_values),
                             rtol=1e-5)
  for gradient, weight in zip(gradient_values, weight_values):
    np.testing.assert_allclose(gradient, 0.004 * weight, rtol=1e-5)


def _traced_step(mixed_precision):
  graph, loss, _, _ = _build_lenet(mixed_precision)
  with graph.as_default(), tf.Session() as sess:
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    sess.run(tf.global_variables_initializer())
    run_metadata = tf.RunMetadata()
    sess.run(train_op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
  return run_metadata


def _raw_compute_kernels(run_metadata, dtype_enum):
  """Executed nodes whose label names a Conv2D or MatMul kernel and whose first output
  has the dtype enum."""
  found = []
  for device in run_metadata.step_stats.dev_stats:
    for node in device.node_stats:
      kernel = node.timeline_label.split(' = ')[-1].split('(')[0]
      if (('Conv2D' in kernel or 'MatMul' in kernel) and node.output
          and node.output[0].tensor_description.dtype == dtype_enum):
        found.append(kernel)
  return found


def test_the_executed_convolutions_and_matmuls_ran_in_float16():
  """(bfloat16, and both through the trainer: tests/training/test_train_precision.py.)"""
  run_metadata = _traced_step('float16')
  kernels = _raw_compute_kernels(run_metadata, DT_HALF)
  # Forward conv1, conv2, fc3, fc4 and their input/filter gradients all ran in it.
  assert len(kernels) >= 8, kernels
  assert _raw_compute_kernels(run_metadata, DT_FLOAT) == []
  assert precision.compute_dtypes(run_metadata) == {'float16': len(kernels)}
  assert precision.describe_compute({'float16': len(kernels), 'float32': 1}) == (
      '%d convolution/matmul kernels ran in float16, 1 in float32' % len(kernels))


def _pools_3d():
  """I3D's kinds of layer (conv3d, max and average 3-D pools) in float16, with gradients."""
  def network_fn(clips):
    net = slim.conv3d(clips, 4, [3, 3, 3], scope='conv')
    net = slim.max_pool3d(net, [1, 2, 2], stride=1, scope='max_pool')
    net = slim.avg_pool3d(net, [2, 2, 2], stride=1, scope='avg_pool')
    return tf.reduce_mean(net, [1, 2, 3]), {}
  logits, _ = precision.network_in_precision(network_fn, 'float16')(tf.zeros([1, 4, 8, 8, 3]))
  tf.gradients(tf.reduce_sum(logits), tf.trainable_variables())


def test_3d_pools_in_float16_have_no_cpu_kernel_and_the_check_says_so():
  assert precision.missing_kernels(_pools_3d, 'float16', 'CPU') == (
      'AvgPool3D', 'AvgPool3DGrad', 'MaxPool3D', 'MaxPool3DGrad')
  assert precision.missing_kernels(_pools_3d, 'bfloat16', 'CPU') == ()
  with tf.Graph().as_default(), tf.Session() as sess:  # TensorFlow agrees: it cannot run.
    pool = tf.nn.max_pool3d(tf.zeros([1, 2, 2, 2, 1], tf.float16), 2, 1, 'VALID')
    with pytest.raises((tf.errors.NotFoundError, tf.errors.InvalidArgumentError)):
      sess.run(pool)
  with pytest.raises(ConfigError, match=r'--mixed_precision=float16: .* CPU kernel in '
                     r'float16 for AvgPool3D, .*MaxPool3D.*--model_name=i3d'):
    precision.check_kernels(_pools_3d, 'float16', 'CPU', 'i3d')


def test_lenet_has_every_kernel_and_float32_asks_nothing():
  build = lambda: _build_lenet('float16')  # Builds in its own graph: nothing to probe.
  assert precision.missing_kernels(build, 'float32', 'CPU') == ()

  def lenet_float16():
    network_fn = nets_factory.get_network_fn('lenet', num_classes=10, is_training=True)
    logits, _ = precision.network_in_precision(network_fn, 'float16')(
        tf.zeros([1, 28, 28, 1]))
    tf.gradients(tf.reduce_sum(logits), tf.trainable_variables())
  assert precision.missing_kernels(lenet_float16, 'float16', 'CPU') == ()


def test_unknown_precision_is_refused():
  with pytest.raises(ValueError, match="mixed_precision='fp16' is not known; valid: "
                     'float32, float16, bfloat16'):
    precision.compute_dtype('fp16')


def _lenet_with_gradients():
  network_fn = precision.network_in_precision(
      nets_factory.get_network_fn('lenet', num_classes=10, is_training=True), 'float16')
  logits, _ = network_fn(tf.zeros([1, 28, 28, 1]))
  tf.gradients(tf.reduce_sum(logits), tf.trainable_variables())


def test_float16_on_a_cpu_is_one_warning_and_a_missing_kernel_one_error(monkeypatch, caplog):
  """The check every entry makes before its graph (trainer, doctor and gpu_speed through
  training.setup, eval.py and export.py through check_inference_kernels): float16 on a
  CPU is logged once per process, on a GPU not at all; a refusal is not also warned."""
  monkeypatch.setattr(precision, '_WARNED', set())
  caplog.set_level('WARNING')
  for _ in range(2):
    precision.check_kernels(_lenet_with_gradients, 'float16', 'CPU', 'lenet')
  assert caplog.text.count('--mixed_precision=float16 on a CPU: ') == 1
  caplog.clear()
  monkeypatch.setattr(precision, '_WARNED', set())
  precision.check_kernels(_lenet_with_gradients, 'bfloat16', 'CPU', 'lenet')
  with pytest.raises(ConfigError, match='no CPU kernel in float16 for AvgPool3D'):
    precision.check_kernels(_pools_3d, 'float16', 'CPU', 'i3d')
  assert 'on a CPU' not in caplog.text
