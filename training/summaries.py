"""What training shows in TensorBoard beyond model_deploy's losses (docs/monitoring.md).

In the graph (fetched with the chief's training step when due: training/progress.py):
  Accuracy/batch_top1        top-1 of the first clone's training batch, before its update
  activations/<end point>, sparsity/<end point>
                             with --summarize_activations (slim's activation summaries)
  the input's own summaries  (datasets.inputs.input_factory: clips after augmentation)

From Python (written by the progress step at each progress line, `write_scalars`):
  examples_per_sec, sec_per_step, global_step/sec, input/wait_share (see InputWait)
  cluster/worker_<i>/steps_per_sec, cluster/stale_gradients,
  cluster/worker_<i>/stale_gradients
                             the chief in a cluster (deployment.worker_stats)

InputWait measures how long each step waits for its input: every clone draws its batch
between two `tf.timestamp`s, and a step waits from its first draw starting until its last
batch has arrived (the clones' compute needs those batches, so nothing else overlaps that
wait but the other clones' draws). With --num_micro_batches=K the clones draw K times a
step, micro-batch k only after k-1 is computed: the wait is counted per micro-batch (its
clones' draws, from the first start to the last arrival) and the K waits add up. The
waits add up in a local variable; the share is the added wait over the wall time between
two progress lines. A prefetch buffer's fill level
is not shown: TensorFlow 2.21 has no stats aggregator for tf.data in graph mode, and no
honest measure of it remains.
"""

from tf_compat import tf, slim

__all__ = ['InputWait', 'add_clone_summaries', 'write_scalars']


class InputWait:
  """Times each clone's batch draw; `total` adds up the seconds steps waited for input.

  Args:
    draws_per_micro_batch: draws that start together (the clones'); successive groups of
      that many draws are micro-batches, waited for one after another.
  """

  def __init__(self, draws_per_micro_batch=1):
    self._group = draws_per_micro_batch
    self._starts, self._arrivals = [], []
    self.total = None

  def draw(self, get_next):
    """Calls get_next() between two timestamps; returns its batch unchanged."""
    start = tf.timestamp()
    with tf.control_dependencies([start]):
      batch = get_next()
    with tf.control_dependencies(tf.nest.flatten(batch)):
      arrival = tf.timestamp()
    self._starts.append(start)
    self._arrivals.append(arrival)
    return batch

  def wrap(self, train_op):
    """`train_op` that also adds this step's wait to `self.total` (a local variable)."""
    if not self._starts:
      return train_op
    with tf.device(self._starts[0].device):
      self.total = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                               collections=[tf.GraphKeys.LOCAL_VARIABLES],
                               name='input_wait_seconds')
      waits = [tf.reduce_max(tf.stack(self._arrivals[i:i + self._group]))
               - tf.reduce_min(tf.stack(self._starts[i:i + self._group]))
               for i in range(0, len(self._starts), self._group)]
      add = self.total.assign_add(tf.add_n(waits))
    with tf.control_dependencies([add]):
      return tf.identity(train_op, name='train_op_with_input_wait')


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
