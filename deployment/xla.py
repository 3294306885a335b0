"""XLA for a clone's step: compile its forward and backward pass, and prove it ran.

    with jit_scope(config.xla):
      logits, end_points = network_fn(inputs)
      tf.losses.softmax_cross_entropy(...)

`tf.xla.experimental.jit_scope` marks every op built inside for compilation, and the
gradients TensorFlow builds for those ops later (in `optimize_clones`) inherit the mark,
so the clone's forward pass, loss and backward pass are compiled; the input pipeline, the
gradient sum across clones and the update are not. Sessions that run such a step take
`session_config(config)`, which keeps Grappler from fusing ops out of the clusters. It works in graph mode on the CPU and
the GPU of TensorFlow 2.21 without any environment variable. (The other route, the
session's `global_jit_level`, is ignored on the CPU unless TF_XLA_FLAGS holds
`--tf_xla_cpu_global_jit`, and clusters whatever it likes, the input included.) Ops XLA
cannot compile stay outside the clusters, which splits them; the trace says how many.

A traced step shows what ran: `xla_clusters(run_metadata)` counts the executed
`_XlaCompile` (compiles a cluster, or finds it in the cache) and `_XlaRun` (runs the
executable) kernels, or `XlaLaunch` (both in one, the older form).
"""

import collections
import contextlib
import copy

from tensorflow.core.protobuf import rewriter_config_pb2

from deployment.step_stats import executed_nodes
from tf_compat import tf

__all__ = ['XLA_KERNELS', 'jit_scope', 'session_config', 'xla_clusters', 'describe_xla']

XLA_KERNELS = ('_XlaCompile', '_XlaRun', 'XlaLaunch')


def jit_scope(enabled):
  """A context compiling the ops built inside with XLA when `enabled`, else nothing.
  Gradients of those ops are compiled with them (same scope)."""
  if not enabled:
    return contextlib.nullcontext()
  return tf.xla.experimental.jit_scope(compile_ops=True, separate_compiled_gradients=False)


def session_config(config):
  """A copy of the session ConfigProto `config` with Grappler's remapper off.

  The remapper runs before XLA's clustering and fuses Conv2D + BiasAdd + Relu (and
  MatMul + BiasAdd) into oneDNN's or cuDNN's fused kernels, which XLA cannot compile: the
  forward convolutions would run outside the clusters, beside a compiled backward pass
  (seen in a traced LeNet step on this CPU). Off, the whole marked step is compiled.
  """
  config = copy.deepcopy(config)
  config.graph_options.rewrite_options.remapping = (
      rewriter_config_pb2.RewriterConfig.OFF)
  return config


def xla_clusters(run_metadata):
  """{kernel: times executed} for the XLA_KERNELS that ran in a traced step ({} when none
  did)."""
  counts = collections.Counter(node.kernel for node in executed_nodes(run_metadata)
                               if node.kernel in XLA_KERNELS)
  return dict(counts)


def describe_xla(counts):
  """'3 XLA clusters compiled and run' from xla_clusters' counts."""
  compiled = counts.get('_XlaCompile', 0) + counts.get('XlaLaunch', 0)
  run = counts.get('_XlaRun', 0) + counts.get('XlaLaunch', 0)
  if not compiled and not run:
    return 'no XLA cluster ran'
  return '%d XLA cluster(s) compiled, %d run' % (compiled, run)
