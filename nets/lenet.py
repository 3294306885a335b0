"""Slim's LeNet variant for small grey-scale or colour images (MNIST-like).

Layout (NHWC, SAME convolutions, VALID 2x2 pools), for a [N, 28, 28, C] input:

    conv1 [N, 28, 28, 32] -> pool1 [N, 14, 14, 32] -> conv2 [N, 14, 14, 64]
    -> pool2 [N, 7, 7, 64] -> Flatten [N, 3136] -> fc3 [N, 1024]
    -> dropout3 [N, 1024] -> fc4 = Logits [N, num_classes] -> Predictions

Variable names are slim's (`LeNet/conv1/weights`, ..., `LeNet/fc4/biases`) so slim
checkpoints load. Optional batch norm (`use_batch_norm=True`) adds
`<layer>/BatchNorm/{beta,moving_mean,moving_variance}` to conv1, conv2 and fc3 and
drops their biases, as slim layers do whenever a normalizer is set.
"""

from tf_compat import tf, slim
from nets import batch_norm
from nets.dropout import dropout
from nets.scopes import reentrant_variable_scope

# The end points `lenet_base` can stop at, in graph order.
BASE_ENDPOINTS = ('conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3')


def lenet_arg_scope(weight_decay=0.0, batch_norm_decay=0.999):
  """Slim's LeNet arg scope: ReLU, truncated-normal(0.1) weights, L2 decay.

  Args:
    weight_decay: float L2 scale for conv and fully connected weights (slim
      rejects ints). slim's `l2_regularizer` adds `weight_decay * sum(w**2) / 2`
      per weight tensor; 0.0 (the default) adds nothing to
      REGULARIZATION_LOSSES at all.
    batch_norm_decay: moving-average decay of the optional batch norm (slim's 0.999).

  Returns:
    An arg scope dict for `slim.arg_scope`.
  """
  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=tf.truncated_normal_initializer(stddev=0.1),
      activation_fn=tf.nn.relu):
    with slim.arg_scope([slim.batch_norm], decay=batch_norm_decay) as scope:
      return scope


def _base_layers():
  """(end point name, layer fn) pairs of the trunk, in order."""
  return (
      ('conv1', lambda net: slim.conv2d(net, 32, [5, 5], scope='conv1')),
      ('pool1', lambda net: slim.max_pool2d(net, [2, 2], 2, scope='pool1')),
      ('conv2', lambda net: slim.conv2d(net, 64, [5, 5], scope='conv2')),
      ('pool2', lambda net: slim.max_pool2d(net, [2, 2], 2, scope='pool2')),
      ('Flatten', lambda net: slim.flatten(net, scope='Flatten')),
      ('fc3', lambda net: slim.fully_connected(net, 1024, scope='fc3')),
  )


def lenet_base(inputs, final_endpoint='fc3', use_batch_norm=False,
               is_training=False, scope='LeNet', freeze_batch_norm='none'):
  """Builds LeNet from the input up to `final_endpoint` (at most fc3).

  Args:
    inputs: float Tensor [batch, height, width, channels]; 28x28 gives the
      shapes in the module docstring, any channel count works.
    final_endpoint: one of BASE_ENDPOINTS; layers after it are not built.
    use_batch_norm: normalise conv1, conv2 and fc3 with `slim.batch_norm`.
    is_training: batch norm mode (batch statistics and moving-average updates in
      tf.GraphKeys.UPDATE_OPS when True, moving averages when False). Unused
      without batch norm.
    scope: variable scope name or object.
    freeze_batch_norm: 'none', 'statistics' or 'all' (nets/batch_norm.py).

  Returns:
    (net, end_points): the `final_endpoint` tensor and a dict name -> tensor of
    every end point built.

  Raises:
    ValueError: `final_endpoint` is not in BASE_ENDPOINTS.
  """
  if final_endpoint not in BASE_ENDPOINTS:
    raise ValueError(f'final_endpoint={final_endpoint!r} is not a LeNet base end '
                     f'point; valid: {", ".join(BASE_ENDPOINTS)}')
  # Setting normalizer_fn=None explicitly makes `use_batch_norm` the one switch,
  # whatever normalizer an enclosing arg scope may carry.
  normalizer_fn = slim.batch_norm if use_batch_norm else None
  end_points = {}
  # One batch-norm implementation for conv and fc layers alike (slim would fuse only
  # the rank-4 ones); same variables and update ops either way.
  with (reentrant_variable_scope(scope, 'LeNet', [inputs]),
        slim.arg_scope([slim.conv2d, slim.fully_connected],
                       normalizer_fn=normalizer_fn),
        slim.arg_scope([slim.batch_norm], fused=False),
        batch_norm.batch_norm_scope(is_training, freeze_batch_norm)):
    net = inputs
    for name, layer in _base_layers():
      net = end_points[name] = layer(net)
      if name == final_endpoint:
        break
  return net, end_points


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
          prediction_fn=slim.softmax, scope='LeNet', use_batch_norm=False,
          freeze_batch_norm='none'):
  """Slim's LeNet classifier.

  Args:
    images: float Tensor [batch, height, width, channels], 28x28 by default.
    num_classes: number of logits; 0 or None returns the fc3 features
      [batch, 1024] (before dropout) and builds no dropout3/fc4.
    is_training: turns dropout (and batch norm training mode) on.
    dropout_keep_prob: keep probability of dropout3 while training.
    prediction_fn: maps logits to the 'Predictions' end point.
    scope: variable scope name.
    use_batch_norm: batch norm on conv1, conv2 and fc3 (see `lenet_base`).
    freeze_batch_norm: 'none', 'statistics' or 'all' (nets/batch_norm.py); dropout
      still follows is_training.

  Returns:
    (logits, end_points): logits [batch, num_classes] (or fc3 features, see
    num_classes) and a dict with conv1, pool1, conv2, pool2, Flatten, fc3,
    dropout3, Logits and Predictions.
  """
  with tf.variable_scope(scope, 'LeNet', [images]) as net_scope:
    net, end_points = lenet_base(images, use_batch_norm=use_batch_norm,
                                 is_training=is_training, scope=net_scope,
                                 freeze_batch_norm=freeze_batch_norm)
    if not num_classes:
      return net, end_points
    net = end_points['dropout3'] = dropout(
        net, dropout_keep_prob, is_training=is_training, scope='dropout3')
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes, activation_fn=None, normalizer_fn=None, scope='fc4')
  # Outside the variable scope, as in slim, so the op is named 'Predictions/...'
  # for graphs exported with slim's output node names.
  end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


lenet.default_image_size = 28
