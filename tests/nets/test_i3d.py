"""I3D: end point shapes, parameter counts, slim variable names, widths, the logits head.

Expected shapes and widths are the published ones, written out here rather than read
from nets/i3d.py; numerical checks compare with NumPy.
"""

import math

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import i3d
from nets import nets_factory

NUM_CLASSES = 400

# [T, H, W, C] of every end point for a 64x224x224 clip (the published table).
SHAPES_64x224 = {
    'Conv3d_1a_7x7': [32, 112, 112, 64],
    'MaxPool3d_2a_3x3': [32, 56, 56, 64],
    'Conv3d_2b_1x1': [32, 56, 56, 64],
    'Conv3d_2c_3x3': [32, 56, 56, 192],
    'MaxPool3d_3a_3x3': [32, 28, 28, 192],
    'Mixed_3b': [32, 28, 28, 256],
    'Mixed_3c': [32, 28, 28, 480],
    'MaxPool3d_4a_3x3': [16, 14, 14, 480],
    'Mixed_4b': [16, 14, 14, 512],
    'Mixed_4c': [16, 14, 14, 512],
    'Mixed_4d': [16, 14, 14, 512],
    'Mixed_4e': [16, 14, 14, 528],
    'Mixed_4f': [16, 14, 14, 832],
    'MaxPool3d_5a_2x2': [8, 7, 7, 832],
    'Mixed_5b': [8, 7, 7, 832],
    'Mixed_5c': [8, 7, 7, 1024],
}

# (time stride, space stride) of each end point relative to the input.
STRIDES = {'Conv3d_1a_7x7': (2, 2), 'MaxPool3d_2a_3x3': (2, 4), 'Conv3d_2b_1x1': (2, 4),
           'Conv3d_2c_3x3': (2, 4), 'MaxPool3d_3a_3x3': (2, 8), 'Mixed_3b': (2, 8),
           'Mixed_3c': (2, 8), 'MaxPool3d_4a_3x3': (4, 16), 'Mixed_4b': (4, 16),
           'Mixed_4c': (4, 16), 'Mixed_4d': (4, 16), 'Mixed_4e': (4, 16),
           'Mixed_4f': (4, 16), 'MaxPool3d_5a_2x2': (8, 32), 'Mixed_5b': (8, 32),
           'Mixed_5c': (8, 32)}

# Mixed widths (branch 0, 1a, 1b, 2a, 2b, 3b) from i3d.md; stem 1a 64, 2b 64, 2c 192.
WIDTHS = {
    'Mixed_3b': (64, 96, 128, 16, 32, 32), 'Mixed_3c': (128, 128, 192, 32, 96, 64),
    'Mixed_4b': (192, 96, 208, 16, 48, 64), 'Mixed_4c': (160, 112, 224, 24, 64, 64),
    'Mixed_4d': (128, 128, 256, 24, 64, 64), 'Mixed_4e': (112, 144, 288, 32, 64, 64),
    'Mixed_4f': (256, 160, 320, 32, 128, 128), 'Mixed_5b': (256, 160, 320, 32, 128, 128),
    'Mixed_5c': (384, 192, 384, 48, 128, 128),
}


def _build(frames=64, size=224, channels=3, batch=2, num_classes=NUM_CLASSES, **kwargs):
  clips = tf.zeros([batch, frames, size, size, channels])
  with slim.arg_scope(i3d.i3d_arg_scope()):
    return i3d.i3d(clips, num_classes=num_classes, **kwargs)


def _shapes(end_points):
  return {name: t.shape.as_list() for name, t in end_points.items()}


def _count(variables):
  return sum(int(np.prod(v.shape.as_list())) for v in variables)


def test_default_image_size():
  assert i3d.i3d.default_image_size == 224


@pytest.fixture(scope='module')
def full_net():
  """(graph, logits, end_points) of the rgb net, 400 classes, 2x64x224x224x3 input.

  Built once: building the 230 variables takes seconds; nothing here runs it.
  """
  with tf.Graph().as_default() as full_graph:
    logits, end_points = _build()
  return full_graph, logits, end_points


def test_end_point_shapes_64x224(full_net):
  _, logits, end_points = full_net
  expected = {name: [2] + shape for name, shape in SHAPES_64x224.items()}
  expected.update(Logits=[2, NUM_CLASSES], Predictions=[2, NUM_CLASSES])
  assert _shapes(end_points) == expected
  assert list(end_points) == list(expected)  # in graph order
  assert logits is end_points['Logits']


@pytest.fixture(scope='module')
def flow_net_16x112():
  """(graph, end_points) of the flow net (2 input channels), 2x16x112x112x2 input: the
  shapes test and the flow test read one build (input channels change no end point's
  shape, the input size no variable)."""
  with tf.Graph().as_default() as flow_graph:
    _, end_points = _build(frames=16, size=112, channels=2)
  return flow_graph, end_points


def test_end_point_shapes_16x112(flow_net_16x112):
  _, end_points = flow_net_16x112
  expected = {}
  for name, (time_stride, space_stride) in STRIDES.items():
    space = math.ceil(112 / space_stride)  # SAME padding rounds up
    expected[name] = [2, math.ceil(16 / time_stride), space, space,
                      SHAPES_64x224[name][3]]
  expected.update(Logits=[2, NUM_CLASSES], Predictions=[2, NUM_CLASSES])
  assert _shapes(end_points) == expected
  assert expected['Mixed_5c'] == [2, 2, 4, 4, 1024]


def _conv_units():
  """(unit scope, [t, h, w], input channels, output channels) of every conv unit but
  the logits, derived from the widths alone."""
  units = [('Conv3d_1a_7x7', [7, 7, 7], 3, 64), ('Conv3d_2b_1x1', [1, 1, 1], 64, 64),
           ('Conv3d_2c_3x3', [3, 3, 3], 64, 192)]
  channels = 192
  for block, (b0, b1a, b1b, b2a, b2b, b3) in WIDTHS.items():
    units += [(f'{block}/Branch_0/Conv3d_0a_1x1', [1, 1, 1], channels, b0),
              (f'{block}/Branch_1/Conv3d_0a_1x1', [1, 1, 1], channels, b1a),
              (f'{block}/Branch_1/Conv3d_0b_3x3', [3, 3, 3], b1a, b1b),
              (f'{block}/Branch_2/Conv3d_0a_1x1', [1, 1, 1], channels, b2a),
              (f'{block}/Branch_2/Conv3d_0b_3x3', [3, 3, 3], b2a, b2b),
              (f'{block}/Branch_3/Conv3d_0b_1x1', [1, 1, 1], channels, b3)]
    channels = b0 + b1b + b2b + b3
  return units


def test_trainable_parameter_count_rgb_400(full_net):
  trainable = full_net[0].get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)
  kernels = [v for v in trainable if v.op.name.endswith('/weights')
             and '/Logits/' not in v.op.name]
  betas = [v for v in trainable if v.op.name.endswith('/BatchNorm/beta')]
  logits = [v for v in trainable if '/Logits/' in v.op.name]
  assert len(kernels) == len(betas) == 57
  assert _count(kernels) == 12_272_704
  assert _count(betas) == 7_280
  assert _count(logits) == 1024 * 400 + 400 == 410_000
  assert len(trainable) == 57 * 2 + 2
  assert _count(trainable) == 12_689_984
  # The same from the widths alone.
  assert sum(int(np.prod(k)) * i * o for _, k, i, o in _conv_units()) == 12_272_704
  assert sum(o for _, _, _, o in _conv_units()) == 7_280


def test_variable_names_and_shapes_are_slim(full_net):
  full_graph = full_net[0]
  variables = full_graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
  shapes = {v.op.name: v.shape.as_list() for v in variables}
  expected = {}
  for unit, kernel, inputs, outputs in _conv_units():
    expected[f'InceptionV1/{unit}/weights'] = kernel + [inputs, outputs]
    for stat in ('beta', 'moving_mean', 'moving_variance'):
      expected[f'InceptionV1/{unit}/BatchNorm/{stat}'] = [outputs]
  expected['InceptionV1/Logits/Conv3d_0c_1x1/weights'] = [1, 1, 1, 1024, NUM_CLASSES]
  expected['InceptionV1/Logits/Conv3d_0c_1x1/biases'] = [NUM_CLASSES]
  assert shapes == expected
  # Every variable is a model variable (what fine-tuning restores and clones share).
  model_variables = full_graph.get_collection(tf.GraphKeys.MODEL_VARIABLES)
  assert set(v.op.name for v in model_variables) == set(expected)
  moving = [v for v in variables if 'moving_' in v.op.name]
  trainable = full_graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)
  assert not set(moving) & set(trainable)
  # Every conv kernel and the logits' carry the L2 loss; training mode: 2 BN updates each.
  assert len(full_graph.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 58
  assert len(full_graph.get_collection(tf.GraphKeys.UPDATE_OPS)) == 57 * 2


def test_op_names_are_not_nested(full_net):
  _, _, end_points = full_net
  assert end_points['Conv3d_1a_7x7'].op.name == 'InceptionV1/Conv3d_1a_7x7/Relu'
  assert end_points['Mixed_5c'].op.name.startswith('InceptionV1/Mixed_5c/')
  assert end_points['Logits'].op.name.startswith('InceptionV1/Logits/')


def test_flow_input_has_two_channel_first_kernel(flow_net_16x112):
  flow_graph, _ = flow_net_16x112
  by_name = {v.op.name: v for v in flow_graph.get_collection(
      tf.GraphKeys.TRAINABLE_VARIABLES)}
  assert by_name['InceptionV1/Conv3d_1a_7x7/weights'].shape.as_list() == [7, 7, 7, 2, 64]
  assert _count(by_name.values()) == 12_689_984 - 7 * 7 * 7 * 64


@pytest.mark.parametrize('multiplier,min_depth', [(0.125, 8), (0.5, 16)])
def test_depth_multiplier_scales_every_width_but_the_logits(graph, multiplier,
                                                              min_depth):
  """Built with spatial_squeeze=False too, which keeps the logits' unit height and width
  (once test_spatial_squeeze_off_keeps_unit_dimensions, which built a net of its own)."""
  logits, _ = _build(frames=8, size=32, depth_multiplier=multiplier, min_depth=min_depth,
                     spatial_squeeze=False)
  assert logits.shape.as_list() == [2, 1, 1, NUM_CLASSES]
  shapes = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
  depth = lambda d: max(int(d * multiplier), min_depth)
  channels = 3
  for unit, kernel, _, outputs in _conv_units():
    weights = shapes[f'InceptionV1/{unit}/weights']
    assert weights[:3] == kernel and weights[4] == depth(outputs), unit
  c5 = WIDTHS['Mixed_5c']
  pooled = depth(c5[0]) + depth(c5[2]) + depth(c5[4]) + depth(c5[5])
  assert shapes['InceptionV1/Logits/Conv3d_0c_1x1/weights'] == [1, 1, 1, pooled, 400]
  assert shapes['InceptionV1/Conv3d_1a_7x7/weights'][3] == channels


@pytest.mark.parametrize('multiplier', [0, -1.0])
def test_depth_multiplier_must_be_positive(graph, multiplier):
  with pytest.raises(ValueError, match='depth_multiplier must be > 0'):
    _build(frames=8, size=32, depth_multiplier=multiplier)


@pytest.fixture(scope='module')
def two_clones():
  """(graph, network_fn, [clone logits]) of the registry's i3d (5 classes, depth 0.125,
  training mode) built as model_deploy builds two clones: each in its own name scope, the second reusing
  the first's variables. The registry test reads clone 0, the clones test both."""
  network_fn = nets_factory.get_network_fn('i3d', num_classes=5, depth_multiplier=0.125,
                                           is_training=True)
  logits = []
  with tf.Graph().as_default() as clones_graph:
    clips = tf.zeros([1, 8, 32, 32, 3])
    for clone in range(2):
      with (tf.name_scope(f'clone_{clone}'),
            tf.variable_scope(tf.get_variable_scope(), reuse=True if clone else None)):
        logits.append(network_fn(clips)[0])
  return clones_graph, network_fn, logits


def test_registry_entry_and_default_weight_decay(two_clones):
  spec = nets_factory.get_network_spec('i3d')
  assert (spec.net_fn, spec.arg_scope_fn) == (i3d.i3d, i3d.i3d_arg_scope)
  assert (spec.default_image_size, spec.default_weight_decay, spec.preprocessing_name,
          spec.default_num_frames) == (224, 1e-7, 'i3d', 64)
  clones_graph, network_fn, (logits, _) = two_clones
  assert network_fn.weight_decay == 1e-7 and network_fn.default_image_size == 224
  assert logits.shape.as_list() == [1, 5]
  with clones_graph.as_default():
    # Made once, with the variables: a reusing clone adds none.
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    kernels = [v for v in tf.global_variables() if v.op.name.endswith('/weights')]
    assert len(losses) == len(kernels) == 58  # 57 units and the logits
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      loss_values, kernel_values = sess.run((losses, kernels))
  reference = [0.5 * 1e-7 * np.sum(k.astype(np.float64) ** 2) for k in kernel_values]
  np.testing.assert_allclose(sorted(loss_values), sorted(reference), rtol=1e-5)


def test_clones_share_variables_and_keep_update_ops_apart(two_clones):
  clones_graph, _, _ = two_clones
  assert len(clones_graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)) == 57 * 4 + 2
  for clone in range(2):
    assert len(clones_graph.get_collection(tf.GraphKeys.UPDATE_OPS,
                                           f'clone_{clone}/')) == 57 * 2


@pytest.mark.parametrize('num_classes', [0, None])
def test_no_classes_returns_pooled_features(graph, num_classes):
  net, end_points = _build(frames=64, size=224, num_classes=num_classes)
  assert net.shape.as_list() == [2, 7, 1, 1, 1024]  # 2x7x7 windows over 8x7x7
  assert list(end_points) == list(SHAPES_64x224)
  assert not [v for v in tf.global_variables() if '/Logits/' in v.op.name]


def test_base_stops_at_final_endpoint(graph):
  net, end_points = i3d.i3d_base(tf.zeros([1, 8, 32, 32, 3]), final_endpoint='Mixed_3b')
  assert list(end_points) == list(SHAPES_64x224)[:6]
  assert net.shape.as_list() == [1, 4, 4, 4, 256]
  assert not [v for v in tf.global_variables() if 'Mixed_3c' in v.op.name]


def test_base_rejects_unknown_final_endpoint_and_4d_inputs(graph):
  with pytest.raises(ValueError, match="'Logits' is not an I3D base end point; valid: "
                                       'Conv3d_1a_7x7, MaxPool3d_2a_3x3'):
    i3d.i3d_base(tf.zeros([1, 8, 32, 32, 3]), final_endpoint='Logits')
  with pytest.raises(ValueError, match=r'5-D inputs \[batch, frames, height, width, '
                                       r'channels\], got shape \(1, 32, 32, 3\)'):
    i3d.i3d_base(tf.zeros([1, 32, 32, 3]))
  assert tf.global_variables() == []


# --- NumPy references -------------------------------------------------------------

def _same_padding(size, kernel, stride):
  """TF's SAME padding (before, after) for one dimension."""
  out = math.ceil(size / stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2


def _numpy_conv3d(x, w, strides):
  """Direct SAME 3-D convolution: x [N, T, H, W, C], w [t, h, w, C, O]."""
  pads = [(0, 0)] + [_same_padding(x.shape[1 + d], w.shape[d], strides[d])
                     for d in range(3)] + [(0, 0)]
  x = np.pad(x, pads)
  out_shape = [(x.shape[1 + d] - w.shape[d]) // strides[d] + 1 for d in range(3)]
  out = np.zeros([x.shape[0]] + out_shape + [w.shape[4]])
  for i, j, k in np.ndindex(*w.shape[:3]):
    patch = x[:, i::strides[0], j::strides[1], k::strides[2], :]
    patch = patch[:, :out_shape[0], :out_shape[1], :out_shape[2], :]
    out += patch @ w[i, j, k]
  return out


def test_first_unit_matches_numpy_conv_batch_norm_relu(graph):
  """Conv3d_1a_7x7 (stride 2, SAME with uneven padding), BN without gamma, ReLU."""
  rng = np.random.RandomState(0)
  clip = rng.randn(2, 9, 13, 11, 3)  # odd sizes: TF pads less before than after
  with (slim.arg_scope(i3d.i3d_arg_scope()),
        slim.arg_scope([slim.batch_norm], is_training=False)):
    net, _ = i3d.i3d_base(tf.constant(clip, tf.float32), final_endpoint='Conv3d_1a_7x7',
                          depth_multiplier=0.125)
  by_name = {v.op.name.split('Conv3d_1a_7x7/')[1]: v for v in tf.global_variables()}
  values = {name: rng.randn(*by_name[name].shape.as_list())
            for name in ('weights', 'BatchNorm/beta', 'BatchNorm/moving_mean')}
  values['BatchNorm/moving_variance'] = rng.uniform(0.5, 2.0, 8)
  with tf.Session() as sess:
    for name, value in values.items():
      by_name[name].load(value.astype(np.float32), sess)
    got = sess.run(net)
  conv = _numpy_conv3d(clip, values['weights'], (2, 2, 2))
  normalised = (conv - values['BatchNorm/moving_mean']) / np.sqrt(
      values['BatchNorm/moving_variance'] + 1e-3) + values['BatchNorm/beta']
  assert got.shape == (2, 5, 7, 6, 8)
  np.testing.assert_allclose(got, np.maximum(normalised, 0), rtol=1e-4, atol=1e-4)


def test_logits_head_matches_numpy(graph):
  """AvgPool 2x7x7 VALID (cut to the map), 1x1x1 conv with bias, mean over time. The net
  is built for inference: no batch norm updates (once a test of its own, which built one
  more I3D for it)."""
  rng = np.random.RandomState(1)
  clip = tf.constant(rng.rand(2, 40, 64, 64, 3), tf.float32)
  with slim.arg_scope(i3d.i3d_arg_scope()):
    logits, end_points = i3d.i3d(clip, num_classes=7, is_training=False,
                                 depth_multiplier=0.125)
  assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
  weights, biases = [v for v in tf.global_variables() if '/Logits/' in v.op.name]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    biases.load(rng.randn(7).astype(np.float32), sess)
    mixed_5c, w, b, got = sess.run((end_points['Mixed_5c'], weights, biases, logits))
  assert mixed_5c.shape[1:4] == (5, 2, 2)  # the kernel is cut to 2x2x2 in space
  windows = [mixed_5c[:, t:t + 2].mean(axis=(1, 2, 3)) for t in range(4)]
  per_window = [feature @ w[0, 0, 0] + b for feature in windows]
  np.testing.assert_allclose(got, np.mean(per_window, axis=0), rtol=1e-4, atol=1e-5)


def test_dropout_only_in_training(graph):
  clip = tf.constant(np.random.RandomState(2).rand(2, 8, 32, 32, 3), tf.float32)
  is_training = tf.placeholder_with_default(False, [])  # one graph for both modes
  with slim.arg_scope(i3d.i3d_arg_scope()):
    logits, _ = i3d.i3d(clip, num_classes=10, is_training=is_training,
                        dropout_keep_prob=0.5, depth_multiplier=0.125)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for training in (True, False):
      first, second = (sess.run(logits, {is_training: training}) for _ in range(2))
      assert first.shape == (2, 10)
      # A new dropout mask per run while training; the identity in inference.
      assert np.array_equal(first, second) != training
