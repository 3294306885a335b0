"""The filter gradient of a strided Conv3D on few input channels, by space-to-depth.

I3D's first layer (`Conv3d_1a_7x7`: 7x7x7, stride 2, on 3 RGB or 2 flow channels)
has a pathological filter gradient on TensorFlow's CPU kernel: `Conv3DBackpropFilterV2`
packs the strided volume patches coefficient by coefficient when Eigen splits the
contraction along its long inner dimension, which it does for narrow outputs on few
threads. On a 2-core AMD EPYC (L3 32 MB) with TF 2.21 it took 11.9 s of a 12.4 s
training step of the narrow demo net (depth 0.25, batch 8 of 8x64x64 clips), while the
forward conv took 0.1 s; the same shapes with 64 output channels took 0.3 s
(`python -m benchmarks.stem_gradient` measures both).

Space-to-depth (as TPU I3D/S3D stems do) turns a stride-s conv with a k-tap kernel
into a stride-1 conv with ceil(k/s) taps on s^3 times the channels: output o reads
padded inputs o*s + j for j < k; with j = q*s + r that is block o+q, phase r. So the
filter gradient of the strided conv is the filter gradient of that stride-1 conv on
the blocked input, unblocked and cut back to k taps. It is exact (only the float
summation order differs) and fast on every shape measured.

Only the gradient changes: the forward op stays slim's own `Conv3D`, the variable
keeps its shape and name (`[7, 7, 7, 3, 64]`, so Kinetics and inflated checkpoints
load as before), and the input gradient is TensorFlow's. Use:

    with strided_filter_gradient():
      net = slim.conv3d(inputs, 64, [7, 7, 7], stride=2, scope='Conv3d_1a_7x7')
"""

import contextlib

from tf_compat import tf

GRADIENT_NAME = 'SpaceToDepthFilterGradConv3D'


def _dim_plan(length, taps, stride, padding):
  """(pad_before, pad_after, blocks, block_taps) of one spatial dimension.

  pad_after may be negative: inputs past the last output's window are cut off.
  """
  if padding == 'SAME':
    outputs = -(-length // stride)
    before = max((outputs - 1) * stride + taps - length, 0) // 2
  else:
    outputs = (length - taps) // stride + 1
    before = 0
  block_taps = -(-taps // stride)
  blocks = outputs + block_taps - 1
  return before, blocks * stride - length - before, blocks, block_taps


def _blocked_input(inputs, plans, strides):
  """[N, D, H, W, C] -> [N, D', H', W', sd*sh*sw*C], phases before channels."""
  inputs = tf.pad(inputs, [[0, 0]] + [[before, max(after, 0)] for before, after, _, _ in plans]
                  + [[0, 0]])
  inputs = inputs[(slice(None),) + tuple(slice(0, blocks * stride)
                                         for (_, _, blocks, _), stride in zip(plans, strides))]
  (_, _, bd, _), (_, _, bh, _), (_, _, bw, _) = plans
  sd, sh, sw = strides
  channels = inputs.shape[4]
  inputs = tf.reshape(inputs, [-1, bd, sd, bh, sh, bw, sw, channels])
  inputs = tf.transpose(inputs, [0, 1, 3, 5, 2, 4, 6, 7])
  return tf.reshape(inputs, [-1, bd, bh, bw, sd * sh * sw * channels])


def space_to_depth_filter_grad(inputs, filter_shape, out_backprop, strides, padding):
  """d loss / d filter of `conv3d(inputs, filter, [1, *strides, 1], padding)`.

  Args:
    inputs: [N, D, H, W, C] with static D, H, W and C.
    filter_shape: [kd, kh, kw, C, O] as Python ints.
    out_backprop: d loss / d output, [N, D_out, H_out, W_out, O].
    strides: (sd, sh, sw).
    padding: 'SAME' or 'VALID'.

  Returns:
    [kd, kh, kw, C, O], the same as Conv3DBackpropFilterV2 up to summation order.
  """
  taps, (channels, outputs) = filter_shape[:3], filter_shape[3:]
  plans = [_dim_plan(length, k, s, padding)
           for length, k, s in zip(inputs.shape.as_list()[1:4], taps, strides)]
  block_taps = [plan[3] for plan in plans]
  phases = strides[0] * strides[1] * strides[2]
  blocked = tf.raw_ops.Conv3DBackpropFilterV2(
      input=_blocked_input(inputs, plans, strides),
      filter_sizes=block_taps + [phases * channels, outputs],
      out_backprop=out_backprop, strides=[1] * 5, padding='VALID')
  grad = tf.reshape(blocked, block_taps + list(strides) + [channels, outputs])
  grad = tf.transpose(grad, [0, 3, 1, 4, 2, 5, 6, 7])
  grad = tf.reshape(grad, [q * s for q, s in zip(block_taps, strides)] + [channels, outputs])
  return grad[:taps[0], :taps[1], :taps[2]]


def _applies(op):
  """True where the space-to-depth form is defined: NDHWC, no dilation, static sizes."""
  inputs, filters = op.inputs
  return (op.get_attr('data_format') == b'NDHWC'
          and all(rate == 1 for rate in op.get_attr('dilations'))
          and op.get_attr('padding') in (b'SAME', b'VALID')
          and inputs.shape[1:].is_fully_defined() and filters.shape.is_fully_defined())


@tf.RegisterGradient(GRADIENT_NAME)
def _conv3d_grad(op, grad):
  """Conv3D's gradient with the filter part by space-to-depth where it applies."""
  inputs, filters = op.inputs
  attrs = {name: op.get_attr(name) for name in ('strides', 'padding', 'data_format', 'dilations')}
  input_grad = tf.raw_ops.Conv3DBackpropInputV2(
      input_sizes=tf.shape(inputs), filter=filters, out_backprop=grad, **attrs)
  if _applies(op):
    filter_grad = space_to_depth_filter_grad(
        inputs, filters.shape.as_list(), grad, attrs['strides'][1:4],
        attrs['padding'].decode())
  else:
    filter_grad = tf.raw_ops.Conv3DBackpropFilterV2(
        input=inputs, filter_sizes=tf.shape(filters), out_backprop=grad, **attrs)
  return input_grad, filter_grad


@contextlib.contextmanager
def strided_filter_gradient():
  """Conv3D ops built inside take their filter gradient by space-to-depth."""
  with tf.get_default_graph().gradient_override_map({'Conv3D': GRADIENT_NAME}):
    yield
