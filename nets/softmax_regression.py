"""Softmax regression: one fully connected layer from the flattened image to the logits.

The classical linear baseline (multinomial logistic regression), in slim's layout:

    images [N, H, W, C] -> Flatten [N, H*W*C] -> Logits [N, num_classes] -> Predictions

Variables: `SoftmaxRegression/logits/weights` [H*W*C, num_classes] and `.../biases`.

Its loss is smooth in the weights, which makes it the network of the numerical
equivalence tests (N synchronous workers against one worker of N x the batch): two runs
that add the same gradients in another float order stay within round-off of each other.
A ReLU network does not: a pre-activation that lies within round-off of zero is on in
one run and off in the other, and the runs part by far more (LeNet from one checkpoint,
one process, 5 steps: 3 runs gave 3 results up to 2.0e-4 apart, relative L2).
"""

from tf_compat import tf, slim
from nets.scopes import reentrant_variable_scope

BASE_ENDPOINTS = ('Flatten',)


def softmax_regression_arg_scope(weight_decay=0.0):
  """L2 decay (slim's `weight_decay * sum(w**2) / 2`) and truncated-normal(0.1) weights.

  Returns:
    An arg scope dict for `slim.arg_scope`.
  """
  with slim.arg_scope([slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      weights_initializer=tf.truncated_normal_initializer(stddev=0.1)) as sc:
    return sc


def softmax_regression_base(inputs, final_endpoint='Flatten', scope='SoftmaxRegression'):
  """The flattened input: (net [N, H*W*C], {'Flatten': net}).

  Raises:
    ValueError: `final_endpoint` is not in BASE_ENDPOINTS.
  """
  if final_endpoint not in BASE_ENDPOINTS:
    raise ValueError(f'final_endpoint={final_endpoint!r} is not a SoftmaxRegression base '
                     f'end point; valid: {", ".join(BASE_ENDPOINTS)}')
  with reentrant_variable_scope(scope, 'SoftmaxRegression', [inputs]):
    net = slim.flatten(inputs, scope='Flatten')
  return net, {'Flatten': net}


def softmax_regression(images, num_classes=10, is_training=False,
                       prediction_fn=slim.softmax, scope='SoftmaxRegression'):
  """Linear logits of the flattened image.

  Args:
    images: float Tensor [batch, height, width, channels], 28x28 by default.
    num_classes: number of logits; 0 or None returns the flattened input.
    is_training: unused (nothing here behaves differently); kept for the factory.
    prediction_fn: maps logits to the 'Predictions' end point.
    scope: variable scope name.

  Returns:
    (logits [batch, num_classes], end_points with Flatten, Logits and Predictions).
  """
  del is_training
  with tf.variable_scope(scope, 'SoftmaxRegression', [images]) as net_scope:
    net, end_points = softmax_regression_base(images, scope=net_scope)
    if not num_classes:
      return net, end_points
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes, activation_fn=None, normalizer_fn=None, scope='logits')
  end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


softmax_regression.default_image_size = 28
