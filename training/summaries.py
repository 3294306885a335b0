"""What training shows in TensorBoard beyond model_deploy's losses (docs/monitoring.md).

In the graph (fetched with the chief's training step when due: training/progress.py):
  Accuracy/batch_top1        top-1 of the first clone's training batch, before its update
  activations/<end point>, sparsity/<end point>
                             with --summarize_activations (slim's activation summaries)
  the input's own summaries  (datasets.inputs.input_factory: clips after augmentation)

From Python (written by the progress step at each progress line, `write_scalars`):
  examples_per_sec, sec_per_step, global_step/sec, input/wait_share (see InputWait)
  cluster/worker_<i>/steps_per_sec, cluster/worker_<i>/steps, cluster/stale_gradients,
  cluster/worker_<i>/stale_gradients
                             the chief in a cluster (deployment.worker_stats)

InputWait measures the time steps are blocked on input: each draw is timed inside the
input iterator's own call (`timed`: a clock read before the batch is taken from the
pipeline, a second once it is), so it is the time a draw waited for a batch, and nothing
else. An earlier version read the clocks as graph ops around `get_next`: with 2 clones
those ops waited for executor threads busy with the other clone's compute, and counted
it (the 2-clone I3D recipe showed 33-66 % while its input made 33x the model's rate).
Draws of one iterator are served one at a time, so their waits never overlap and add up,
for N clones and K micro-batches alike (docs/monitoring.md, "Reading the input wait").
"""

import time

import numpy as np
from tensorflow.python.framework import config as tf_config  # Op determinism's switch.

from datasets.inputs.record_files import as_written
from tf_compat import tf, slim

__all__ = ['InputWait', 'add_clone_summaries', 'write_scalars']


class InputWait:
  """Times each batch draw inside the iterator; `total` adds up the seconds steps waited.

  Build the input with `timed(dataset)`, draw with `draw(iterator)` (one call per clone
  and micro-batch), and run `wrap(train_op)`.
  """

  def __init__(self):
    self._waits = []
    self.total = None

  @staticmethod
  def timed(dataset):
    """`dataset` whose elements are (element, seconds the draw waited for it).

    The clock dataset comes first in the zip: its map runs in the draw's own call (a
    function with a stateful op is never moved to a background thread), then the
    pipeline is asked for a batch, then the outer map reads the clock again.
    """
    now = _now_python if tf_config.is_op_determinism_enabled() else _now
    clock = tf.data.Dataset.from_tensors(0).repeat().map(as_written(now))
    return tf.data.Dataset.zip((clock, dataset)).map(as_written(
        lambda start, element: (element, now(0) - start)))

  def draw(self, iterator):
    """The next element of a `timed` dataset's iterator, its wait kept for `wrap`."""
    element, wait = iterator.get_next()
    self._waits.append(wait)
    return element

  def wrap(self, train_op):
    """`train_op` that also adds this step's waits to `self.total` (a local variable)."""
    if not self._waits:
      return train_op
    with tf.device(self._waits[0].device):
      self.total = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                               collections=[tf.GraphKeys.LOCAL_VARIABLES],
                               name='input_wait_seconds')
      add = self.total.assign_add(tf.add_n(self._waits))
    with tf.control_dependencies([add]):
      return tf.identity(train_op, name='train_op_with_input_wait')


@tf.autograph.experimental.do_not_convert
def _now(_):
  return tf.timestamp()


@tf.autograph.experimental.do_not_convert
def _now_python(_):
  """The clock under --deterministic, where TensorFlow refuses tf.timestamp (a value that
  differs between runs): Python's, read by the same draw (a stateful function stays in
  the draw's call too)."""
  return tf.reshape(tf.numpy_function(lambda: np.float64(time.time()), [], tf.float64,
                                      stateful=True), [])


def add_clone_summaries(logits, labels, end_points, summarize_activations):
  """The batch's top-1 and, if asked, activation and sparsity summaries per end point."""
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int64)
  correct = tf.equal(predictions, tf.cast(labels, tf.int64))
  tf.summary.scalar('Accuracy/batch_top1', tf.reduce_mean(tf.cast(correct, tf.float32)))
  if summarize_activations:
    for name, tensor in sorted(end_points.items()):
      slim.summaries.add_histogram_summary(tensor, 'activations/' + name)
      slim.summaries.add_zero_fraction_summary(tensor, 'sparsity/' + name)


def write_scalars(writer, global_step, values):
  """Writes {tag: float} as one Summary at `global_step` (nothing without a writer)."""
  if writer is None or not values:
    return
  summary = tf.Summary(value=[tf.Summary.Value(tag=tag, simple_value=float(value))
                              for tag, value in sorted(values.items())])
  writer.add_summary(summary, global_step)
