"""What the parameter servers hold between two synchronous updates, and its record.

`Accumulators` builds the conditional accumulators of one `SyncReplicasOptimizer`
(deployment/sync_replicas.py): one per variable, on the variable's device, and one record
of who contributed, on the global step's device. Every gradient carries a label, its
worker's step or -1 (stale, dropped). The record is one accumulator taken with the
gradients, so an update knows how many gradients each worker gave and for which step
(`record_per_worker`); with a trace file the chief appends that as one line per update
(`trace_op`), which `read_trace` reads back: the record the tests check.
"""

import collections

from tf_compat import tf

__all__ = ['Accumulators', 'record_per_worker', 'trace_op', 'TraceLine', 'read_trace']

TraceLine = collections.namedtuple('TraceLine', ['step', 'counts', 'steps'])


class Accumulators:
  """The accumulators of one synchronous update; each take averages
  `replicas_to_aggregate` gradients."""

  def __init__(self, replicas_to_aggregate):
    self._replicas_to_aggregate = replicas_to_aggregate
    self._held = []  # (accumulator, its device)

  def gradient(self, grad, var, label):
    """(this worker's send op, the chief's mean over replicas_to_aggregate) for one var;
    (None, None) for a None gradient."""
    if grad is None:
      return None, None
    with tf.device(var.device):
      if isinstance(grad, tf.IndexedSlices):
        accumulator = tf.SparseConditionalAccumulator(
            grad.dtype, shape=(), shared_name=var.name + '/grad_accum')
        send = accumulator.apply_indexed_slices_grad(grad, local_step=label)
        mean = accumulator.take_indexed_slices_grad(self._replicas_to_aggregate)
      else:
        accumulator = tf.ConditionalAccumulator(grad.dtype, shape=var.get_shape(),
                                                shared_name=var.name + '/grad_accum')
        send = accumulator.apply_grad(grad, local_step=label)
        mean = accumulator.take_grad(self._replicas_to_aggregate)
    self._held.append((accumulator, var.device))
    return send, mean

  def record(self, worker, total, label, device):
    """Who contributed: [one-hot(worker), one-hot(worker) x step] in ONE accumulator on
    `device` (same label as the gradients), so an update's mean x n gives the gradient
    count and the step sum of each of the `total` workers, taken together. (Two
    accumulators could take different workers' entries when backup workers race.)

    n is the number of gradients taken: at least replicas_to_aggregate, more when backup
    workers' gradients of the same step arrive before the chief takes them (an
    accumulator averages everything it holds). The mean's first row is k_i / n for worker
    i's count k_i, so n = 1 / (its smallest non-zero entry), exact whenever some worker
    gave one gradient (always, unless every worker counted twice).

    Returns:
      ([this worker's send op], (counts, step sums): float64 [total] each).
    """
    with tf.device(device), tf.name_scope('contributions'):
      onehot = tf.one_hot(worker, total, dtype=tf.float64)
      value = tf.stack([onehot, onehot * tf.cast(label, tf.float64)])
      accumulator = tf.ConditionalAccumulator(tf.float64, shape=[2, total],
                                              shared_name='sync_record')
      send = accumulator.apply_grad(value, local_step=label)
      mean = accumulator.take_grad(self._replicas_to_aggregate)
      shares = mean[0]
      smallest = tf.reduce_min(tf.where(shares > 0, shares, tf.ones_like(shares)))
      taken = mean * tf.round(1.0 / smallest)
      self._held.append((accumulator, device))
      # Sliced here too: the whole update stays on the parameter server, so a chief that
      # is frozen or dies cannot stop an update half-way (after global_step moved).
      return [send], (taken[0], taken[1])

  def set_global_step(self, step):
    """Every accumulator's step: gradients labelled below `step` are dropped."""
    ops = []
    for accumulator, device in self._held:
      with tf.device(device):
        ops.append(accumulator.set_global_step(step))
    return tf.group(*ops)

  def discard(self):
    """Takes (and drops) whatever each accumulator holds."""
    ops = []
    for accumulator, device in self._held:
      with tf.device(device):
        if isinstance(accumulator, tf.SparseConditionalAccumulator):
          take = lambda a=accumulator: tf.group(*a.take_indexed_slices_grad(1))
        else:
          take = lambda a=accumulator: tf.group(a.take_grad(1))
        ops.append(tf.cond(accumulator.num_accumulated() > 0, take, tf.no_op))
    return tf.group(*ops)

  def num_accumulated(self):
    """int32 [accumulators]: the gradients each one holds."""
    return tf.stack([a.num_accumulated() for a, _ in self._held])


def record_per_worker(record):
  """(gradients taken from each worker, the step of its gradients or -1), int64, of an
  update's record (`Accumulators.record`)."""
  counts, steps = record
  counts = tf.cast(tf.round(counts), tf.int64)
  per_worker = tf.cast(tf.round(steps / tf.maximum(tf.cast(counts, tf.float64), 1.0)),
                       tf.int64)
  return counts, tf.where(counts > 0, per_worker,
                          tf.fill(tf.shape(counts), tf.constant(-1, tf.int64)))


def trace_op(record, global_step, path):
  """Appends the update's line to the trace file `path` (read by `read_trace`); run after
  the update (the step it names is global_step - 1)."""
  counts, per_worker = record_per_worker(record)
  join = lambda values: tf.strings.reduce_join(tf.strings.as_string(values),
                                               separator=',')
  step = tf.cast(global_step.read_value(), tf.int64) - 1  # After the update.
  return tf.print('update', step, join(counts), join(per_worker), sep='\t',
                  output_stream='file://' + path)


def read_trace(path):
  """The chief's trace: [TraceLine(step, counts per worker, step of each worker's
  gradient or -1)], one per update, in order."""
  lines = []
  with open(path) as trace:
    for line in trace:
      fields = line.replace('"', '').split()  # tf.print quotes string tensors.
      if len(fields) == 4 and fields[0] == 'update':
        lines.append(TraceLine(int(fields[1]), [int(c) for c in fields[2].split(',')],
                               [int(s) for s in fields[3].split(',')]))
  return lines
