"""Mixed precision: the network computes in float16 or bfloat16, variables stay float32.

    network_fn = network_in_precision(network_fn, 'float16')
    logits, end_points = network_fn(images)     # images float32; logits float32

The design is tf_cnn_benchmarks' and does not rely on a graph rewrite (TensorFlow's
automatic mixed-precision pass converts to float16 only for GPUs, and its oneDNN bfloat16
pass is a CPU optimization with its own rules, which made an I3D step about 3x slower on
this CPU): explicit casts, the same on every device, and a trace that shows they ran.

  * the inputs are cast to the compute dtype before the network;
  * a variable custom getter creates every floating variable the network asks for in
    float32, under the name it asked for, and hands the layer a cast of it to the
    compute dtype: weights, checkpoints and the optimizer's slots are float32 and carry
    the same names as a float32 run's, so checkpoints restore across precisions in both
    directions; the gradient of the cast brings every gradient back to float32. A
    non-trainable variable asked for in half precision (batch-norm moving statistics of
    slim's unfused batch norm) is handed over as the float32 variable itself: the layer
    updates it in place. (slim's fused and Keras batch norms ask for float32 statistics
    and parameters on half inputs, as cuDNN wants.)
  * the logits and every floating end point are cast back to float32, so losses,
    softmax, metrics and summaries are float32; so are the weights' regularization losses
    (slim's layers compute them from the half cast: slim's L2 is rebuilt on the float32
    variable, which is also where its gradient goes).

float16 training also needs loss scaling (`deployment.loss_scale`); bfloat16 has
float32's exponent range and needs none.

Not every kernel exists in every dtype on every device. TensorFlow 2.21's CPU build has no
float16 MaxPool3D or AvgPool3D (I3D on a CPU in float16 cannot run) and no bfloat16 LRN
(cifarnet); `missing_kernels` finds such ops in a network's graph before anything runs, so
the entry can refuse the combination in one line. And what really ran is in a traced
step: `compute_dtypes` counts the executed convolution and matrix-multiplication kernels
by output dtype (after Grappler's and oneDNN's rewrites), which is what tells a user (and
the tests) that the compute ran in half precision.
"""

import collections
import functools
import re

import numpy as np
from tensorflow.python.framework import kernels  # The registry of compiled kernels.

from absl import logging

from core.errors import require
from deployment.session.precision_options import (HALF_PRECISIONS, PRECISIONS,
                                                  half_precision_device_warning)
from deployment.trace.step_stats import executed_nodes
from tf_compat import tf

__all__ = ['compute_dtype', 'float32_variables', 'network_in_precision', 'missing_kernels',
           'check_kernels', 'check_inference_kernels', 'compute_dtypes', 'describe_compute']

_DTYPES = {'float32': tf.float32, 'float16': tf.float16, 'bfloat16': tf.bfloat16}
# Executed kernels that do a network's multiply-adds, under any rewrite's name
# (Conv2D, Conv3D, _MklNativeFusedConv2D, Conv2DBackpropFilter, MatMul, _FusedMatMul ...).
_COMPUTE_KERNEL = re.compile(r'Conv[23]D|MatMul')


def compute_dtype(mixed_precision):
  """The tf.DType of a PRECISIONS name ('float32', 'float16', 'bfloat16')."""
  if mixed_precision not in _DTYPES:
    raise ValueError('mixed_precision=%r is not known; valid: %s'
                     % (mixed_precision, ', '.join(PRECISIONS)))
  return _DTYPES[mixed_precision]


def _float32_getter(dtype):
  """A custom getter: variables asked for in `dtype` are made float32 (module doc)."""

  def custom_getter(getter, name, *args, **kwargs):  # TF passes getter= by keyword.
    asked = kwargs.get('dtype')
    if asked is None or tf.as_dtype(asked).base_dtype != dtype:
      return getter(name, *args, **kwargs)
    kwargs['dtype'] = tf.float32
    initializer = kwargs.get('initializer')
    if isinstance(initializer, (tf.Tensor, np.ndarray)):  # A value: float32 as well.
      kwargs['initializer'] = tf.cast(initializer, tf.float32)
    variable = getter(name, *args, **kwargs)
    if kwargs.get('trainable') is False:
      return variable
    return tf.cast(variable, dtype, name=name.rsplit('/', 1)[-1] + '_cast')
  return custom_getter


def float32_variables(dtype):
  """A context (the current variable scope re-entered, names and reuse unchanged) in
  which floating variables asked for in `dtype` are created in float32 and read as a
  cast to `dtype`."""
  return tf.variable_scope(tf.get_variable_scope(), custom_getter=_float32_getter(dtype),
                           auxiliary_name_scope=False)


def _to_float32(tensor):
  if isinstance(tensor, tf.Tensor) and tensor.dtype in (tf.float16, tf.bfloat16):
    return tf.cast(tensor, tf.float32)
  return tensor


def _float32_regularization(known, weight_decay):
  """Regularization losses added after the first `known`, in float32.

  slim's layers apply their weights regularizer to what the getter returned, the half
  cast: an L2 loss summed in float16 loses precision and can overflow, and the scale is
  rounded to the half dtype (a decay of 1e-7 is a float16 subnormal, 19% off). slim's
  `l2_regularizer` (scale * l2_loss(w)) is rebuilt on the float32 variable, as a float32
  run computes it, with `weight_decay` (the network's, nets_factory sets it on
  network_fn) when the half scale is its rounding; any other half loss is cast.
  """
  losses = tf.get_collection_ref(tf.GraphKeys.REGULARIZATION_LOSSES)
  for index in range(known, len(losses)):
    if losses[index].dtype in (tf.float16, tf.bfloat16):
      losses[index] = _float32_loss(losses[index], weight_decay)


def _float32_loss(loss, weight_decay):
  op = loss.op
  if op.type == 'Mul':
    scale, l2 = op.inputs
    source = l2.op.inputs[0] if l2.op.type == 'L2Loss' else None
    value = tf.get_static_value(scale)
    if (source is not None and source.op.type == 'Cast' and value is not None
        and source.op.inputs[0].dtype.base_dtype == tf.float32):
      if weight_decay is not None and np.array(weight_decay, value.dtype) == value:
        value = weight_decay  # The exact float32 scale the half one rounds.
      return tf.multiply(float(value), tf.nn.l2_loss(source.op.inputs[0]),
                         name=op.name.rsplit('/', 1)[-1] + '_float32')
  return tf.cast(loss, tf.float32)


def network_in_precision(network_fn, mixed_precision):
  """`network_fn` computing in `mixed_precision`, with float32 inputs and outputs.

  Args:
    network_fn: fn(inputs, ...) -> (logits, end_points), as nets_factory returns.
    mixed_precision: one of PRECISIONS; 'float32' returns network_fn itself.

  Returns:
    fn(inputs, ...) -> (float32 logits, end_points with every half-precision tensor cast
    to float32). Inputs of any float dtype are cast to the compute dtype.
  """
  dtype = compute_dtype(mixed_precision)
  if dtype == tf.float32:
    return network_fn

  def half_precision_fn(inputs, *args, **kwargs):
    known = len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
    with float32_variables(dtype):
      logits, end_points = network_fn(tf.cast(inputs, dtype), *args, **kwargs)
    _float32_regularization(known, getattr(network_fn, 'weight_decay', None))
    return _to_float32(logits), {name: _to_float32(tensor)
                                 for name, tensor in end_points.items()}
  for attribute in ('default_image_size', 'default_num_frames', 'weight_decay', 'spec'):
    if hasattr(network_fn, attribute):
      setattr(half_precision_fn, attribute, getattr(network_fn, attribute))
  return half_precision_fn


@functools.lru_cache(maxsize=None)
def _has_kernel(op_type, device_type, dtype_enum):
  for kernel in kernels.get_registered_kernels_for_op(op_type).kernel:
    if kernel.device_type != device_type:
      continue
    allowed = [c.allowed_values.list.type for c in kernel.constraint if c.name == 'T']
    if not allowed or dtype_enum in allowed[0]:
      return True
  return False


def missing_kernels(build_fn, mixed_precision, device_type):
  """Op types of a network's graph that have no `device_type` kernel in the compute dtype.

  Args:
    build_fn: fn() that builds the network (and, for training, its gradients) in the
      default graph with float32 inputs; called in a scratch graph, under
      `network_in_precision`'s variable scope.
    mixed_precision: one of PRECISIONS.
    device_type: 'CPU' or 'GPU' (a CPU build of TensorFlow registers no GPU kernels: ask
      only about devices this process has).

  Returns:
    Sorted op types whose dtype attribute T is the compute dtype and which have no kernel
    for it on that device; () for float32.
  """
  if mixed_precision not in HALF_PRECISIONS:
    return ()
  dtype = compute_dtype(mixed_precision)
  with tf.Graph().as_default() as graph:
    build_fn()
  missing = set()
  for op in graph.get_operations():
    try:
      if op.get_attr('T') != dtype:
        continue
    except ValueError:  # No T attribute: not a typed compute op.
      continue
    if not _has_kernel(op.type, device_type, dtype.as_datatype_enum):
      missing.add(op.type)
  return tuple(sorted(missing))


_WARNED = set()


def check_kernels(build_fn, mixed_precision, device_type, model_name):
  """Raises ConfigError naming the ops of `missing_kernels` when there are any; otherwise
  logs, once per process, the line of a precision that is slow on the device
  (`half_precision_device_warning`: float16 on a CPU)."""
  missing = missing_kernels(build_fn, mixed_precision, device_type)
  require(not missing, '--mixed_precision=%s: TensorFlow %s has no %s kernel in %s for %s, '
          'which --model_name=%s uses; on this device use another --mixed_precision '
          '(float32 always works)' % (mixed_precision, tf.__version__, device_type,
                                      mixed_precision, ', '.join(missing), model_name))
  warning = half_precision_device_warning(mixed_precision, device_type)
  if warning and warning not in _WARNED:
    _WARNED.add(warning)
    logging.warning('%s', warning)


def check_inference_kernels(network_fn, mixed_precision, input_shape, model_name):
  """check_kernels for the forward pass of `network_fn` on zeros of `input_shape` (one
  example), on the device inference runs on: a GPU when TensorFlow sees one."""
  if mixed_precision not in HALF_PRECISIONS:
    return
  on_gpu = bool(tf.config.list_physical_devices('GPU'))
  check_kernels(lambda: network_in_precision(network_fn, mixed_precision)(
      tf.zeros(input_shape)), mixed_precision, 'GPU' if on_gpu else 'CPU', model_name)


def compute_dtypes(run_metadata):
  """{dtype name: number of executed convolution / matmul kernels whose first output has
  that dtype} in a traced step (forward and backward, any rewrite; XLA clusters hide the
  kernels they compile)."""
  counts = collections.Counter()
  for node in executed_nodes(run_metadata):
    if _COMPUTE_KERNEL.search(node.kernel) and node.output_dtypes:
      counts[node.output_dtypes[0].name] += 1
  return dict(counts)


def describe_compute(counts):
  """'12 convolution/matmul kernels ran in float16, 2 in float32' (or a note when none
  ran outside XLA clusters)."""
  if not counts:
    return 'no convolution or matmul kernel ran outside XLA clusters'
  ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
  first = '%d convolution/matmul kernels ran in %s' % (ordered[0][1], ordered[0][0])
  return ', '.join([first] + ['%d in %s' % (n, name) for name, n in ordered[1:]])
