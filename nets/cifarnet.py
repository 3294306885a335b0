"""Slim's CifarNet, a variant of the CIFAR-10 model of the TensorFlow tutorial.

Layout (NHWC, SAME convolutions, VALID pools), for a [N, 32, 32, 3] input:

    conv1 [N, 32, 32, 64] -> pool1 [N, 16, 16, 64] -> norm1 (LRN)
    -> conv2 [N, 16, 16, 64] -> norm2 (LRN) -> pool2 [N, 8, 8, 64]
    -> Flatten [N, 4096] -> fc3 [N, 384] -> dropout3 -> fc4 [N, 192]
    -> logits = Logits [N, num_classes] -> Predictions

The pools are 2x2 with stride 2, as in slim's cifarnet.py, not the tutorial's 3x3:
a 3x3 VALID pool would give a [3136, 384] fc3 and slim checkpoints would not load.
Variable names are slim's (`CifarNet/conv1/weights`, ..., `CifarNet/logits/biases`).
"""

from tf_compat import tf, slim
from nets.dropout import dropout
from nets.scopes import reentrant_variable_scope

# The end points `cifarnet_base` can stop at, in graph order.
BASE_ENDPOINTS = ('conv1', 'pool1', 'norm1', 'conv2', 'norm2', 'pool2', 'Flatten',
                  'fc3', 'dropout3', 'fc4')


def cifarnet_arg_scope(weight_decay=0.004):
  """Slim's CifarNet arg scope.

  Only fully connected weights are L2-regularised (as in slim); conv layers are
  not, and the logits layer opts out itself.

  Args:
    weight_decay: float L2 scale for fc3 and fc4 weights; slim's `l2_regularizer`
      adds `weight_decay * sum(w**2) / 2` per weight tensor.

  Returns:
    An arg scope dict for `slim.arg_scope`.
  """
  with slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf.truncated_normal_initializer(stddev=5e-2),
      activation_fn=tf.nn.relu):
    with slim.arg_scope(
        [slim.fully_connected],
        biases_initializer=tf.constant_initializer(0.1),
        weights_initializer=tf.truncated_normal_initializer(stddev=0.04),
        weights_regularizer=slim.l2_regularizer(weight_decay),
        activation_fn=tf.nn.relu) as scope:
      return scope


def _lrn(net, name):
  # Tutorial constants: neighbourhood of 4 channels each side, tiny alpha.
  return tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def _base_layers(is_training, dropout_keep_prob):
  """(end point name, layer fn) pairs of the trunk, in order."""
  return (
      ('conv1', lambda net: slim.conv2d(net, 64, [5, 5], scope='conv1')),
      ('pool1', lambda net: slim.max_pool2d(net, [2, 2], 2, scope='pool1')),
      ('norm1', lambda net: _lrn(net, 'norm1')),
      ('conv2', lambda net: slim.conv2d(net, 64, [5, 5], scope='conv2')),
      ('norm2', lambda net: _lrn(net, 'norm2')),
      ('pool2', lambda net: slim.max_pool2d(net, [2, 2], 2, scope='pool2')),
      ('Flatten', lambda net: slim.flatten(net, scope='Flatten')),
      ('fc3', lambda net: slim.fully_connected(net, 384, scope='fc3')),
      ('dropout3', lambda net: dropout(
          net, dropout_keep_prob, is_training=is_training, scope='dropout3')),
      ('fc4', lambda net: slim.fully_connected(net, 192, scope='fc4')),
  )


def cifarnet_base(inputs, final_endpoint='fc4', is_training=False,
                  dropout_keep_prob=0.5, scope='CifarNet'):
  """Builds CifarNet from the input up to `final_endpoint` (at most fc4).

  Dropout sits between fc3 and fc4, inside the feature extractor, which is why
  this base takes `is_training` and `dropout_keep_prob`.

  Args:
    inputs: float Tensor [batch, height, width, channels]; 32x32x3 gives the
      shapes in the module docstring.
    final_endpoint: one of BASE_ENDPOINTS; layers after it are not built.
    is_training: turns dropout3 on.
    dropout_keep_prob: keep probability of dropout3 while training.
    scope: variable scope name or object.

  Returns:
    (net, end_points): the `final_endpoint` tensor and a dict name -> tensor of
    every end point built.

  Raises:
    ValueError: `final_endpoint` is not in BASE_ENDPOINTS.
  """
  if final_endpoint not in BASE_ENDPOINTS:
    raise ValueError(f'final_endpoint={final_endpoint!r} is not a CifarNet base '
                     f'end point; valid: {", ".join(BASE_ENDPOINTS)}')
  end_points = {}
  with reentrant_variable_scope(scope, 'CifarNet', [inputs]):
    net = inputs
    for name, layer in _base_layers(is_training, dropout_keep_prob):
      net = end_points[name] = layer(net)
      if name == final_endpoint:
        break
  return net, end_points


def cifarnet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
             prediction_fn=slim.softmax, scope='CifarNet'):
  """Slim's CifarNet classifier.

  Args:
    images: float Tensor [batch, height, width, channels], 32x32x3 by default.
    num_classes: number of logits; 0 or None returns the fc4 features
      [batch, 192] and builds no logits layer.
    is_training: turns dropout on.
    dropout_keep_prob: keep probability of dropout3 while training.
    prediction_fn: maps logits to the 'Predictions' end point.
    scope: variable scope name.

  Returns:
    (logits, end_points): logits [batch, num_classes] (or fc4 features, see
    num_classes) and a dict with every BASE_ENDPOINTS entry, Logits and
    Predictions.
  """
  with tf.variable_scope(scope, 'CifarNet', [images]) as net_scope:
    net, end_points = cifarnet_base(images, is_training=is_training,
                                    dropout_keep_prob=dropout_keep_prob,
                                    scope=net_scope)
    if not num_classes:
      return net, end_points
    # Slim's own logits initialisation, unregularised, overriding the fc defaults.
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes,
        biases_initializer=tf.zeros_initializer(),
        weights_initializer=tf.truncated_normal_initializer(stddev=1 / 192.0),
        weights_regularizer=None,
        activation_fn=None,
        scope='logits')
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


cifarnet.default_image_size = 32
