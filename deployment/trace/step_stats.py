"""What a traced step really executed: each node's kernel, device and output dtypes.

The graph says what was asked; Grappler and oneDNN rewrite it before it runs (a Conv2D
with its BiasAdd and Relu runs as `_MklNativeFusedConv2D` under the Relu's name), XLA
replaces whole clusters by `_XlaCompile` / `_XlaRun`, and the automatic mixed-precision
passes may change dtypes. A step run with `FULL_TRACE` records, per executed node, a
timeline label `"<node> = <Kernel>(<inputs>)"` and the dtype of every output:

    run_metadata = tf.RunMetadata()
    sess.run(train_op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    for node in executed_nodes(run_metadata): ...

`deployment.precision.compute_dtypes` and `deployment.xla.xla_clusters` read it.
"""

import collections
import re

from tf_compat import tf

__all__ = ['ExecutedNode', 'executed_nodes']

ExecutedNode = collections.namedtuple('ExecutedNode',
                                      ['name', 'kernel', 'device', 'output_dtypes'])
ExecutedNode.__doc__ = """One node of a traced step: its name, the kernel that ran (op
type after rewrites, e.g. '_MklNativeFusedConv2D'), its device and its outputs' dtypes
(tf.DType, in output order)."""

# '[mklcpu 0.2MB 0.2MB] LeNet/conv1/Relu = _MklNativeFusedConv2D(Cast, ...)'
_LABEL = re.compile(r'(?:^|\]\s)(\S+) = ([A-Za-z0-9_]+)\(')


def executed_nodes(run_metadata):
  """[ExecutedNode] of every node of the traced step that has a kernel label, in the
  trace's order (device by device)."""
  nodes = []
  for device_stats in run_metadata.step_stats.dev_stats:
    for node in device_stats.node_stats:
      match = _LABEL.search(node.timeline_label)
      if not match:
        continue
      dtypes = tuple(tf.as_dtype(output.tensor_description.dtype)
                     for output in node.output if output.tensor_description.dtype)
      nodes.append(ExecutedNode(node.node_name, match.group(2), device_stats.device,
                                dtypes))
  return nodes
