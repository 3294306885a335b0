"""Precise batch norm (--precise_bn_batches=N, PySlowFast's precise BN): moving statistics
that fit the final weights.

A batch norm's moving mean and variance are exponential averages of batch statistics
taken while the weights kept changing (with clones, of the first clone's batch only:
model_deploy runs its update ops). After the last step `PreciseBatchNorm.run` runs every
clone's forward pass in training mode on N batches of the training input, the weights
fixed, and sets each moving mean and variance to the plain mean over the N batches of the
statistic the training update averages, taken over the global batch (every clone's
examples; `global_statistics`): the mean, and the variance, unbiased (x M/(M-1), M values
per channel) for fused layers, whose update averages FusedBatchNorm's Bessel-corrected
batch variance, biased for the others (tf.nn.moments). Each layer's input is computed as
in training, earlier layers normalised by each clone's own batch. Only the moving
statistics (and their moving-average shadows) change. The ops are built with the graph,
before the Supervisor finalizes it.
"""

import collections
import re
import time

import numpy as np
from absl import logging

from deployment import replicated
from tf_compat import tf

__all__ = ['PreciseBatchNorm', 'global_statistics']

_FUSED = ('FusedBatchNormV3', 'FusedBatchNormV2', 'FusedBatchNorm')
_OTHER_MICRO_BATCH = re.compile(r'(^|/)micro_batch_\d+/')  # deployment.accumulation's
_SHADOW = '/ExponentialMovingAverage'

Layer = collections.namedtuple('Layer', ['name', 'moving_mean', 'moving_variance',
                                         'unbiased', 'inputs'])
Layer.__doc__ = """One batch norm: its variable scope, moving variables, whether its update
averages an unbiased variance (fused), and its input in each clone ([batch, ..., C])."""


def global_statistics(means, variances, counts, unbiased):
  """(mean, variance) float64 [C] of the union of the clones' batches.

  Args:
    means, variances: [clones, C] each clone's batch mean and biased variance.
    counts: [clones] values per channel in each clone's batch.
    unbiased: whether to return the unbiased variance (x M/(M-1), M = sum of counts).
  """
  counts = np.asarray(counts, np.float64)[:, None]
  means = np.asarray(means, np.float64)
  total = counts.sum()
  mean = (counts * means).sum(axis=0) / total
  # E_c[var_c + mean_c^2] - mean^2, written without the cancellation of that form.
  variance = (counts * (np.asarray(variances, np.float64) + (means - mean) ** 2)).sum(
      axis=0) / total
  if unbiased:
    variance = variance * total / (total - 1)
  return mean, variance


def _layer_input(graph, scope):
  """(input tensor, fused) of the batch norm whose ops are under name scope `scope`."""
  for op_type in _FUSED:
    try:
      return graph.get_operation_by_name('%s/%s' % (scope, op_type)).inputs[0], True
    except KeyError:
      pass
  try:
    return graph.get_operation_by_name(scope + '/moments/mean').inputs[0], False
  except KeyError:
    raise ValueError('no batch norm op under %s (neither %s nor moments/mean)'
                     % (scope, ', '.join(_FUSED))) from None


def _find_layers(clones):
  """[Layer] of every batch norm with moving statistics, from each clone's update ops."""
  variables = {v.op.name: v for v in tf.global_variables()}
  found = collections.OrderedDict()
  for clone in clones:
    for update in tf.get_collection(tf.GraphKeys.UPDATE_OPS, clone.scope):
      if _OTHER_MICRO_BATCH.search(update.name) or not (
          update.name.endswith('/AssignMovingAvg')
          and update.inputs[0].op.name.endswith('/moving_mean')):
        continue
      # A replicated clone's copy counts for clone 0's layer (deployment.replicated).
      name = replicated.original_name(update.inputs[0].op.name)[:-len('/moving_mean')]
      tensor, fused = _layer_input(update.graph, update.name[:-len('/AssignMovingAvg')])
      if name not in found:
        found[name] = Layer(name, variables[name + '/moving_mean'],
                            variables[name + '/moving_variance'], fused, [])
      found[name].inputs.append((tensor, clone.device))
  return list(found.values())


def _clone_statistics(tensor, device, channels):
  """(mean, biased variance, values per channel) of one clone's layer input."""
  if tensor.shape.as_list()[-1] != channels:
    raise ValueError('%s: %s values per position, %d moving statistics: batch norm over '
                     'the last axis (channels last) only' % (
                         tensor.name, tensor.shape.as_list()[-1], channels))
  with tf.device(device):
    values = tf.cast(tensor, tf.float32)
    axes = list(range(values.shape.ndims - 1))
    mean = tf.reduce_mean(values, axes)
    variance = tf.reduce_mean(tf.math.squared_difference(values, mean), axes)
    return mean, variance, tf.size(values) // channels


def _assign(variable, shadows, value):
  """Sets `variable` and its moving-average shadow, if any, to `value`."""
  shadow = shadows.get(variable.op.name)
  return [tf.assign(target, value) for target in (variable, shadow) if target is not None]


class PreciseBatchNorm:
  """Recomputes the moving statistics; build it with the graph, `run` it after training.

  Args:
    clones: the clones of model_deploy.deploy (with --num_micro_batches, micro-batch 0's).
    num_batches: N, the batches each clone draws.
  """

  def __init__(self, clones, num_batches):
    self.num_batches = num_batches
    self.ran = False
    self.layers = _find_layers(clones)
    if not self.layers:
      raise ValueError('precise batch norm: the clones have no batch norm update ops')
    sizes = [tensor.shape.as_list()[0] for tensor, _ in self.layers[0].inputs]
    self._batch = ('%d examples' % sum(sizes) if None not in sizes else 'the global batch')
    shadows = {v.op.name[:-len(_SHADOW)]: v for v in tf.global_variables()
               if v.op.name.endswith(_SHADOW)}
    with tf.name_scope('precise_bn'):
      self._statistics = []
      self._feeds = []
      assigns = []
      for layer in self.layers:
        channels = int(layer.moving_mean.shape[0])
        self._statistics.append([_clone_statistics(tensor, device, channels)
                                 for tensor, device in layer.inputs])
        feeds = [tf.placeholder(tf.float32, [channels]) for _ in range(2)]
        self._feeds.append(feeds)
        for variable, feed in zip((layer.moving_mean, layer.moving_variance), feeds):
          with tf.device(variable.device):
            assigns += _assign(variable, shadows, feed)
      self._assign = tf.group(*assigns)

  def run(self, sess, beat=lambda: None):
    """N forward passes, then the assignment; `beat()` after each pass."""
    start = time.time()
    sums = [[0.0, 0.0] for _ in self.layers]
    for _ in range(self.num_batches):
      values = sess.run(self._statistics)
      for layer, total, clones in zip(self.layers, sums, values):
        mean, variance = global_statistics(*zip(*clones), unbiased=layer.unbiased)
        total[0] = total[0] + mean
        total[1] = total[1] + variance
      beat()
    feed = {}
    for feeds, total in zip(self._feeds, sums):
      for placeholder, value in zip(feeds, total):
        feed[placeholder] = (value / self.num_batches).astype(np.float32)
    sess.run(self._assign, feed)
    self.ran = True
    logging.info('Precise batch norm: the moving mean and variance of %d layers recomputed '
                 'with the final weights over %d training batches of %s (every clone\'s '
                 'batch together), in %.1f s', len(self.layers), self.num_batches,
                 self._batch, time.time() - start)
