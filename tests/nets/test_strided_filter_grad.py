"""The space-to-depth filter gradient of a strided Conv3D, against NumPy's direct sum.

The reference is the definition: d loss / d w[a, b, c] = sum over outputs of the input
tap (a, b, c) of each output's window times that output's gradient, with TensorFlow's
SAME padding (the smaller half before).
"""

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import i3d
from nets.strided_filter_grad import (GRADIENT_NAME, space_to_depth_filter_grad,
                                      strided_filter_gradient)


def _padding(length, taps, stride, padding):
  if padding == 'VALID':
    return (length - taps) // stride + 1, 0, 0
  outputs = -(-length // stride)
  total = max((outputs - 1) * stride + taps - length, 0)
  return outputs, total // 2, total - total // 2


def _windows(x, taps, strides, padding):
  """Yields ((a, b, c), the [N, Do, Ho, Wo, C] inputs that tap (a, b, c) reads)."""
  plans = [_padding(x.shape[i + 1], taps[i], strides[i], padding) for i in range(3)]
  padded = np.pad(x, [(0, 0)] + [(before, after) for _, before, after in plans] + [(0, 0)])
  for a in range(taps[0]):
    for b in range(taps[1]):
      for c in range(taps[2]):
        yield (a, b, c), padded[:, a::strides[0], b::strides[1], c::strides[2]][
            :, :plans[0][0], :plans[1][0], :plans[2][0]]


def numpy_filter_grad(x, taps, channels_out, dy, strides, padding):
  grad = np.zeros(list(taps) + [x.shape[4], channels_out], np.float64)
  for tap, window in _windows(x.astype(np.float64), taps, strides, padding):
    grad[tap] = np.einsum('ndhwc,ndhwo->co', window, dy)
  return grad


def numpy_conv(x, w, strides, padding):
  return sum(np.einsum('ndhwc,co->ndhwo', window, w[tap])
             for tap, window in _windows(x.astype(np.float64), w.shape[:3], strides, padding))


CASES = [
    # (input [N, D, H, W, C], filter [kd, kh, kw, C, O], strides, padding)
    ([2, 8, 16, 16, 3], [7, 7, 7, 3, 4], (2, 2, 2), 'SAME'),    # I3D's stem, even sizes
    ([2, 9, 13, 15, 3], [7, 7, 7, 3, 5], (2, 2, 2), 'SAME'),    # odd sizes
    ([1, 9, 14, 11, 2], [7, 7, 7, 2, 3], (2, 2, 2), 'VALID'),   # flow, cut-off tail
    ([2, 6, 12, 12, 3], [7, 7, 7, 3, 4], (1, 2, 2), 'SAME'),    # stride 1 in time
    ([1, 7, 10, 10, 3], [3, 5, 5, 3, 2], (3, 2, 3), 'SAME'),    # stride above half the taps
    ([2, 4, 6, 6, 3], [7, 7, 7, 3, 2], (2, 2, 2), 'SAME'),      # kernel larger than input
]


@pytest.mark.parametrize('input_shape,filter_shape,strides,padding', CASES)
def test_filter_grad_equals_the_direct_sum(graph, input_shape, filter_shape, strides, padding):
  rng = np.random.RandomState(0)
  x = rng.randn(*input_shape).astype(np.float32)
  out_shape = [input_shape[0]] + [_padding(input_shape[i + 1], filter_shape[i], strides[i],
                                           padding)[0] for i in range(3)] + [filter_shape[4]]
  dy = rng.randn(*out_shape).astype(np.float32)
  grad = space_to_depth_filter_grad(tf.constant(x), filter_shape, tf.constant(dy), strides,
                                    padding)
  with tf.Session() as sess:
    got = sess.run(grad)
  want = numpy_filter_grad(x, filter_shape[:3], filter_shape[4], dy, strides, padding)
  assert got.shape == tuple(filter_shape)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _loss_and_grads(x, w, dy, strides, padding, placeholder_shape=None):
  """(input grad, filter grad) of sum(conv3d(x, w) * dy) with the override on."""
  inputs = tf.placeholder(tf.float32, placeholder_shape or x.shape)
  weights = tf.constant(w)
  with strided_filter_gradient():
    out = tf.nn.conv3d(inputs, weights, [1, *strides, 1], padding)
  assert out.op.get_attr('_gradient_op_type') == GRADIENT_NAME.encode()
  grads = tf.gradients(tf.reduce_sum(out * dy), [inputs, weights])
  with tf.Session() as sess:
    return sess.run([out] + grads, {inputs: x})


@pytest.mark.parametrize('placeholder_shape', [None, [None, None, None, None, 3]],
                         ids=['static sizes', 'dynamic sizes: TF kernel'])
def test_the_registered_gradient_gives_both_gradients(graph, placeholder_shape):
  rng = np.random.RandomState(1)
  x = rng.randn(2, 9, 13, 15, 3).astype(np.float32)
  w = rng.randn(7, 7, 7, 3, 4).astype(np.float32)
  dy = rng.randn(2, 5, 7, 8, 4).astype(np.float32)
  out, input_grad, filter_grad = _loss_and_grads(x, w, dy, (2, 2, 2), 'SAME', placeholder_shape)
  np.testing.assert_allclose(out, numpy_conv(x, w, (2, 2, 2), 'SAME'), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(filter_grad, numpy_filter_grad(x, (7, 7, 7), 4, dy, (2, 2, 2),
                                                            'SAME'), rtol=1e-4, atol=1e-4)
  # The input gradient is the transpose of the (linear) conv: <conv(e), dy> = <e, dx>.
  probe = rng.randn(*x.shape)
  np.testing.assert_allclose(np.sum(numpy_conv(probe, w, (2, 2, 2), 'SAME') * dy),
                             np.sum(probe * input_grad), rtol=1e-4)


def test_i3d_takes_only_its_strided_stem_conv_by_space_to_depth(graph):
  clips = tf.zeros([1, 8, 32, 32, 3])
  with slim.arg_scope(i3d.i3d_arg_scope()):
    i3d.i3d(clips, num_classes=5, depth_multiplier=0.125)
  overridden = sorted(op.name for op in graph.get_operations()
                      if op.type == 'Conv3D' and '_gradient_op_type' in op.node_def.attr)
  assert overridden == ['InceptionV1/Conv3d_1a_7x7/Conv3D']
  stem = graph.get_tensor_by_name('InceptionV1/Conv3d_1a_7x7/weights:0')
  assert stem.shape.as_list() == [7, 7, 7, 3, 8]  # the checkpoint's variable, unchanged
