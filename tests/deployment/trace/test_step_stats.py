"""deployment.trace.step_stats: executed nodes read from a RunMetadata built by hand."""

from deployment.trace.step_stats import ExecutedNode, executed_nodes
from tf_compat import tf


def _metadata():
  run_metadata = tf.RunMetadata()
  device = run_metadata.step_stats.dev_stats.add(device='/job:localhost/replica:0/task:0/device:CPU:0')
  conv = device.node_stats.add(
      node_name='LeNet/conv1/Relu',
      timeline_label='[mklcpu 0.2MB 0.2MB] LeNet/conv1/Relu = _MklNativeFusedConv2D(Cast, w)')
  conv.output.add(slot=0).tensor_description.dtype = tf.float16.as_datatype_enum
  conv.output.add(slot=1).tensor_description.dtype = tf.uint8.as_datatype_enum
  device.node_stats.add(node_name='_SOURCE', timeline_label='')  # no kernel: left out
  compile_node = device.node_stats.add(
      node_name='cluster_0_1/xla_compile',
      timeline_label='cluster_0_1/xla_compile = _XlaCompile(a, b)')
  compile_node.output.add(slot=0).tensor_description.dtype = tf.string.as_datatype_enum
  return run_metadata


def test_each_labelled_node_gives_its_kernel_device_and_output_dtypes():
  device = '/job:localhost/replica:0/task:0/device:CPU:0'
  assert executed_nodes(_metadata()) == [
      ExecutedNode('LeNet/conv1/Relu', '_MklNativeFusedConv2D', device,
                   (tf.float16, tf.uint8)),
      ExecutedNode('cluster_0_1/xla_compile', '_XlaCompile', device, (tf.string,))]
