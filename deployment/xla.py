"""XLA for a clone's step: compile its forward and backward pass, and prove it ran.

    with jit_scope(config.xla):                       # in the clone
      logits, end_points = network_fn(inputs)
      tf.losses.softmax_cross_entropy(...)
    optimizer = CompiledGradients(optimizer)          # what model_deploy.deploy gets

Ops built in `jit_scope` carry the attributes of `tf.xla.experimental.jit_scope`
(`_XlaCompile`, and one `_XlaScope` name, the same for every clone step); the gradients
TensorFlow builds for them inherit the scope, and `CompiledGradients` builds the rest of
the gradient computation (the sums where a tensor feeds several ops, the gating ops) in
the same scope. XLA only clusters ops of one scope together: with a new
`tf.xla.experimental.jit_scope` around the gradients, or none, every gradient sum of I3D's
Inception modules cut the backward pass into its own cluster (123 clusters for the
narrow I3D's step, measured; with one scope name: a few). The input pipeline, the
gradient sum across clones and the update are not compiled. Sessions that run such a
step take `session_config(config)`, which keeps Grappler from fusing ops out of the
clusters. It works in graph mode on the CPU and the GPU of TensorFlow 2.21 without any
environment variable. (The other route, the session's `global_jit_level`, is ignored on
the CPU unless TF_XLA_FLAGS holds `--tf_xla_cpu_global_jit`, and clusters whatever it
likes.) Ops XLA cannot compile (reads of reference variables, random ops) stay outside.

A traced step shows what ran: `xla_clusters(run_metadata)` counts the executed
`_XlaCompile` (compiles a cluster, or finds it in the cache) and `_XlaRun` (runs the
executable) kernels, or `XlaLaunch` (both in one, the older form).
"""

import collections
import contextlib
import copy

from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

from deployment.trace.step_stats import executed_nodes
from deployment.wrapped_optimizer import WrappedOptimizer
from tf_compat import tf

__all__ = ['XLA_KERNELS', 'SCOPE_NAME', 'jit_scope', 'CompiledGradients', 'session_config',
           'xla_clusters', 'describe_xla']

XLA_KERNELS = ('_XlaCompile', '_XlaRun', 'XlaLaunch')
SCOPE_NAME = b'slimdeploy_clone_step'
_ATTRIBUTES = {'_XlaCompile': attr_value_pb2.AttrValue(b=True),
               '_XlaSeparateCompiledGradients': attr_value_pb2.AttrValue(b=False),
               '_XlaScope': attr_value_pb2.AttrValue(s=SCOPE_NAME)}


def jit_scope(enabled):
  """A context compiling the ops built inside with XLA when `enabled`, else nothing.

  `tf.xla.experimental.jit_scope` with a fixed scope name, so that what `CompiledGradients`
  builds later joins the same clusters; it sets the attributes the same way
  (the graph's attribute scope).
  """
  if not enabled:
    return contextlib.nullcontext()
  return tf.get_default_graph()._attr_scope(_ATTRIBUTES)  # pylint: disable=protected-access


class CompiledGradients(WrappedOptimizer):
  """Wraps an optimizer: its compute_gradients runs in `jit_scope(True)`; everything else
  is the wrapped optimizer's."""

  def __init__(self, opt, name='CompiledGradients'):
    super().__init__(opt, name)

  def compute_gradients(self, *args, **kwargs):
    with jit_scope(True):
      return self._opt.compute_gradients(*args, **kwargs)


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
