"""I3D: Inception-v1 inflated to 3-D (Carreira & Zisserman, CVPR 2017), slim style.

Layout (NDHWC; every conv is Conv3D SAME without bias + BatchNorm without gamma +
ReLU; pools are SAME max pools), with shapes [T, H, W, C] for a 64x224x224 clip:

    Conv3d_1a_7x7     7x7x7 stride 2,2,2   32x112x112x64
    MaxPool3d_2a_3x3  1x3x3 stride 1,2,2   32x56x56x64
    Conv3d_2b_1x1                          32x56x56x64
    Conv3d_2c_3x3                          32x56x56x192
    MaxPool3d_3a_3x3  1x3x3 stride 1,2,2   32x28x28x192
    Mixed_3b, Mixed_3c                     32x28x28x256, x480
    MaxPool3d_4a_3x3  3x3x3 stride 2,2,2   16x14x14x480
    Mixed_4b .. Mixed_4f                   16x14x14x512, 512, 512, 528, 832
    MaxPool3d_5a_2x2  2x2x2 stride 2,2,2   8x7x7x832
    Mixed_5b, Mixed_5c                     8x7x7x832, x1024
    Logits: AvgPool 2x7x7 VALID -> 7x1x1x1024, dropout, Conv3d_0c_1x1 (bias, no BN,
            no activation) -> 7x1x1xN, squeeze space, mean over time -> [N]

Each Mixed block has four branches concatenated on channels: Branch_0 Conv3d_0a_1x1;
Branch_1 and Branch_2 Conv3d_0a_1x1 then Conv3d_0b_3x3 (3x3x3); Branch_3
MaxPool3d_0a_3x3 (3x3x3, stride 1) then Conv3d_0b_1x1.

Variable names are slim's (`InceptionV1/Conv3d_1a_7x7/weights`,
`InceptionV1/Conv3d_1a_7x7/BatchNorm/{beta,moving_mean,moving_variance}`,
`InceptionV1/Logits/Conv3d_0c_1x1/{weights,biases}`), so 2-D Inception-v1 checkpoints
inflate name by name (nets/inflation.py). Unlike tf_slim's 2-D net and DeepMind's
checkpoints, Mixed_5b/Branch_2's 3x3 conv is called Conv3d_0b_3x3 like in every other
block; the checkpoint name maps (nets/i3d_checkpoints.py) translate the old name.
"""

from tf_compat import tf, slim
from nets import batch_norm
from nets.dropout import dropout
from nets.scopes import reentrant_variable_scope

# The end points `i3d_base` can stop at, in graph order.
BASE_ENDPOINTS = ('Conv3d_1a_7x7', 'MaxPool3d_2a_3x3', 'Conv3d_2b_1x1', 'Conv3d_2c_3x3',
                  'MaxPool3d_3a_3x3', 'Mixed_3b', 'Mixed_3c', 'MaxPool3d_4a_3x3',
                  'Mixed_4b', 'Mixed_4c', 'Mixed_4d', 'Mixed_4e', 'Mixed_4f',
                  'MaxPool3d_5a_2x2', 'Mixed_5b', 'Mixed_5c')

# Mixed block widths: Branch_0 1x1, Branch_1 1x1 and 3x3, Branch_2 1x1 and 3x3,
# Branch_3 1x1 (after the pool).
MIXED_WIDTHS = {
    'Mixed_3b': (64, 96, 128, 16, 32, 32),
    'Mixed_3c': (128, 128, 192, 32, 96, 64),
    'Mixed_4b': (192, 96, 208, 16, 48, 64),
    'Mixed_4c': (160, 112, 224, 24, 64, 64),
    'Mixed_4d': (128, 128, 256, 24, 64, 64),
    'Mixed_4e': (112, 144, 288, 32, 64, 64),
    'Mixed_4f': (256, 160, 320, 32, 128, 128),
    'Mixed_5b': (256, 160, 320, 32, 128, 128),
    'Mixed_5c': (384, 192, 384, 48, 128, 128),
}

# Stem layers: (end point, kind, output width or None, kernel [T, H, W], stride).
_STEM = {
    'Conv3d_1a_7x7': ('conv', 64, [7, 7, 7], [2, 2, 2]),
    'MaxPool3d_2a_3x3': ('pool', None, [1, 3, 3], [1, 2, 2]),
    'Conv3d_2b_1x1': ('conv', 64, [1, 1, 1], 1),
    'Conv3d_2c_3x3': ('conv', 192, [3, 3, 3], 1),
    'MaxPool3d_3a_3x3': ('pool', None, [1, 3, 3], [1, 2, 2]),
    'MaxPool3d_4a_3x3': ('pool', None, [3, 3, 3], [2, 2, 2]),
    'MaxPool3d_5a_2x2': ('pool', None, [2, 2, 2], [2, 2, 2]),
}

# The Logits average pool, [T, H, W]: 2x7x7 over the 8x7x7 map of a 64x224x224 clip.
LOGITS_POOL = (2, 7, 7)


def i3d_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999, batch_norm_epsilon=1e-3):
  """Conv3D (no bias) + BatchNorm (no gamma) + ReLU, as DeepMind's Unit3D.

  Args:
    weight_decay: float L2 scale for every conv kernel, the logits' included;
      slim's `l2_regularizer` adds `weight_decay * sum(w**2) / 2` per kernel.
    batch_norm_decay: moving-average decay (Sonnet's BatchNorm default, 0.999).
    batch_norm_epsilon: variance epsilon (Sonnet's default, 1e-3).

  Returns:
    An arg scope dict for `slim.arg_scope`.
  """
  with slim.arg_scope(
      [slim.conv3d],
      weights_initializer=slim.variance_scaling_initializer(),
      weights_regularizer=slim.l2_regularizer(weight_decay),
      activation_fn=tf.nn.relu,
      normalizer_fn=slim.batch_norm):
    with slim.arg_scope(
        [slim.batch_norm],
        decay=batch_norm_decay,
        epsilon=batch_norm_epsilon,
        center=True,
        scale=False,
        updates_collections=tf.GraphKeys.UPDATE_OPS) as scope:
      return scope


def _depth_fn(depth_multiplier, min_depth):
  """Width scaling: d -> max(int(d * depth_multiplier), min_depth)."""
  if not depth_multiplier > 0:
    raise ValueError(f'depth_multiplier must be > 0, got {depth_multiplier!r}')
  return lambda depth: max(int(depth * depth_multiplier), min_depth)


def _mixed(net, widths, depth):
  """One Inception block; returns [N, T, H, W, sum of the four branch widths]."""
  b0, b1a, b1b, b2a, b2b, b3 = (depth(width) for width in widths)
  with tf.variable_scope('Branch_0'):
    branch_0 = slim.conv3d(net, b0, [1, 1, 1], scope='Conv3d_0a_1x1')
  with tf.variable_scope('Branch_1'):
    branch_1 = slim.conv3d(net, b1a, [1, 1, 1], scope='Conv3d_0a_1x1')
    branch_1 = slim.conv3d(branch_1, b1b, [3, 3, 3], scope='Conv3d_0b_3x3')
  with tf.variable_scope('Branch_2'):
    branch_2 = slim.conv3d(net, b2a, [1, 1, 1], scope='Conv3d_0a_1x1')
    branch_2 = slim.conv3d(branch_2, b2b, [3, 3, 3], scope='Conv3d_0b_3x3')
  with tf.variable_scope('Branch_3'):
    branch_3 = slim.max_pool3d(net, [3, 3, 3], stride=1, scope='MaxPool3d_0a_3x3')
    branch_3 = slim.conv3d(branch_3, b3, [1, 1, 1], scope='Conv3d_0b_1x1')
  return tf.concat([branch_0, branch_1, branch_2, branch_3], axis=4)


def _layer(net, end_point, depth):
  """Builds the end point `end_point` on top of `net`."""
  if end_point in MIXED_WIDTHS:
    with tf.variable_scope(end_point):
      return _mixed(net, MIXED_WIDTHS[end_point], depth)
  kind, width, kernel, stride = _STEM[end_point]
  if kind == 'conv':
    return slim.conv3d(net, depth(width), kernel, stride=stride, scope=end_point)
  return slim.max_pool3d(net, kernel, stride=stride, scope=end_point)


def _check_inputs(inputs):
  if inputs.shape.ndims != 5:
    raise ValueError('I3D takes 5-D inputs [batch, frames, height, width, channels], '
                     f'got shape {inputs.shape}')


def i3d_base(inputs, final_endpoint='Mixed_5c', depth_multiplier=1.0, min_depth=8,
             scope='InceptionV1'):
  """Builds I3D from the input up to `final_endpoint` (at most Mixed_5c).

  Batch norm mode comes from the enclosing arg scope, as in slim's Inception nets
  (`i3d` sets it; slim.batch_norm defaults to training mode).

  Args:
    inputs: float Tensor [batch, frames, height, width, channels]: 3 channels for
      RGB, 2 for optical flow (any count works). 64x224x224 gives the shapes in the
      module docstring; each dimension shrinks by ceil-division under SAME
      padding, time by 8 and space by 32 in all.
    final_endpoint: one of BASE_ENDPOINTS; layers after it are not built.
    depth_multiplier: every conv width d becomes max(int(d * depth_multiplier),
      min_depth); e.g. 0.125 for a narrow net on CPU.
    min_depth: the smallest width depth_multiplier may leave.
    scope: variable scope name or object.

  Returns:
    (net, end_points): the `final_endpoint` tensor and a dict name -> tensor of
    every end point built, in order.

  Raises:
    ValueError: unknown `final_endpoint`, depth_multiplier <= 0, or inputs that
      are not 5-D.
  """
  if final_endpoint not in BASE_ENDPOINTS:
    raise ValueError(f'final_endpoint={final_endpoint!r} is not an I3D base end point; '
                     f'valid: {", ".join(BASE_ENDPOINTS)}')
  depth = _depth_fn(depth_multiplier, min_depth)
  _check_inputs(inputs)
  end_points = {}
  with (reentrant_variable_scope(scope, 'InceptionV1', [inputs]),
        slim.arg_scope([slim.conv3d, slim.max_pool3d], stride=1, padding='SAME')):
    net = inputs
    for end_point in BASE_ENDPOINTS:
      net = end_points[end_point] = _layer(net, end_point, depth)
      if end_point == final_endpoint:
        break
  return net, end_points


def _logits_pool_kernel(net):
  """LOGITS_POOL, cut to the map's size where the map is smaller (slim's habit)."""
  dims = net.shape.as_list()[1:4]
  return [kernel if size is None else min(kernel, size)
          for kernel, size in zip(LOGITS_POOL, dims)]


def _logits(net, num_classes, dropout_keep_prob, spatial_squeeze):
  """[N, T', H', W', C] Mixed_5c -> per-window logits [N, T'', N_cls] (squeezed).

  Returns the pooled features instead when num_classes is 0 or None.
  """
  net = slim.avg_pool3d(net, _logits_pool_kernel(net), stride=1, padding='VALID',
                        scope='AvgPool3d_0a_7x7')
  if not num_classes:
    return net
  net = dropout(net, dropout_keep_prob, scope='Dropout_0b')
  logits = slim.conv3d(net, num_classes, [1, 1, 1], activation_fn=None,
                       normalizer_fn=None, biases_initializer=tf.zeros_initializer(),
                       scope='Conv3d_0c_1x1')
  if spatial_squeeze:
    logits = tf.squeeze(logits, [2, 3], name='SpatialSqueeze')
  return logits


def i3d(inputs, num_classes=400, is_training=True, dropout_keep_prob=0.8,
        prediction_fn=slim.softmax, spatial_squeeze=True, depth_multiplier=1.0,
        min_depth=8, reuse=None, scope='InceptionV1', freeze_batch_norm='none'):
  """The I3D classifier.

  Args:
    inputs: float Tensor [batch, frames, height, width, channels] (see i3d_base).
    num_classes: number of logits (400 for Kinetics); 0 or None returns the pooled
      features [batch, T', 1, 1, 1024 * depth_multiplier] (T' = 7 for 64 frames:
      one per 2-step window of the 8-step Mixed_5c map) and builds no dropout or
      logits layer.
    is_training: batch norm mode and dropout on/off.
    dropout_keep_prob: keep probability of the dropout before the logits.
    prediction_fn: maps logits to the 'Predictions' end point.
    spatial_squeeze: squeeze the 1x1 spatial dimensions of the logits. If False,
      logits are [batch, 1, 1, num_classes].
    depth_multiplier: scales every conv width but the logits' (see i3d_base).
    min_depth: the smallest width depth_multiplier may leave.
    reuse: reuse the variables of `scope` (give `scope` to reuse).
    scope: variable scope name.
    freeze_batch_norm: 'none', 'statistics' or 'all' (nets/batch_norm.py): while
      training, batch norm may use (and keep) its moving statistics, and keep beta.

  Returns:
    (logits, end_points): logits [batch, num_classes], the per-window logits
    averaged over time (or the pooled features, see num_classes), and a dict with
    every BASE_ENDPOINTS entry, Logits and Predictions.
  """
  with (tf.variable_scope(scope, 'InceptionV1', [inputs], reuse=reuse) as net_scope,
        slim.arg_scope([dropout], is_training=is_training),
        batch_norm.batch_norm_scope(is_training, freeze_batch_norm)):
    net, end_points = i3d_base(inputs, depth_multiplier=depth_multiplier,
                               min_depth=min_depth, scope=net_scope)
    with tf.variable_scope('Logits'):
      net = _logits(net, num_classes, dropout_keep_prob, spatial_squeeze)
      if not num_classes:
        return net, end_points
      logits = end_points['Logits'] = tf.reduce_mean(net, axis=1, name='TemporalMean')
      end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


i3d.default_image_size = 224
