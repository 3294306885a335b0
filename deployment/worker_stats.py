"""What each worker of a cluster does, counted on the parameter servers, shown by the chief.

Every worker's train op adds to its own row of one small int64 table that lives beside
global_step on a parameter server:

    column STEPS  training steps this worker finished
    column STALE  of those steps (synchronous replicas only), how many sent a gradient
                  that no update took: it reached the accumulators after the update of
                  its step had taken its gradients (a backup worker too late, a worker
                  descheduled past the update), or it was labelled stale because its
                  worker had already sent one for that step (a restarted worker), or a
                  rejoining chief discarded it (deployment.sync_replicas)

A synchronous worker decides its step's STALE bit after its wait for the next token has
ended: by then the update of the step it sent a gradient for has happened, and the
update records which workers' gradients it took (`SyncReplicasOptimizer`'s `last_taken`,
from the same record as its trace). A step ended by a stop token (a stopping task) is not
counted: no update has decided its gradient. So for every worker, at any time,

    STEPS = gradients the updates took from it (the trace's counts) + STALE

Asynchronous workers apply their own gradient at once and nothing is dropped: they count
steps only. The table is in no collection (never saved, so a restored checkpoint cannot
bring back old counts); the chief initializes it once per parameter-server lifetime, and
workers wait for it before their first step (`variables`, `initializer`).

`ClusterProgress` turns two readings of the table into each worker's steps/sec, the
TensorBoard scalars and the chief's progress line about its cluster.
"""

from tf_compat import tf

__all__ = ['WorkerStats', 'ClusterProgress', 'STEPS', 'STALE']

STEPS, STALE = 0, 1


class WorkerStats:
  """The table (num_workers x [steps, stale]) and this worker's counting op.

  Args:
    num_workers: workers in the cluster.
    worker_index: this worker's task index (its row).
    device: where the table lives (global_step's device).
  """

  def __init__(self, num_workers, worker_index, device):
    if not 0 <= worker_index < num_workers:
      raise ValueError('worker_index=%d must be in [0, %d)' % (worker_index, num_workers))
    self.num_workers, self.worker_index = num_workers, worker_index
    self._device = device
    zeros = lambda: tf.zeros([num_workers, 2], tf.int64)
    with tf.device(device), tf.name_scope('worker_stats'):
      self.table = tf.Variable(zeros(), trainable=False, collections=[], name='table')

      def initialize():  # Built inside the branch, so it runs only when taken.
        return tf.group(self.table.assign(zeros()))
      self.initializer = tf.cond(tf.is_variable_initialized(self.table), tf.no_op,
                                 initialize, name='initialize_once')
      self.value = self.table.read_value()
    self.variables = [self.table]
    self.own_row = None  # [steps, stale] of this worker after its step (set by count).

  def count(self, after, stale=None, counted=None):
    """The op adding one step to this worker's row, once the ops `after` have run.

    Args:
      after: ops (the train op's parts) the count waits for.
      stale: optional bool tensor: the step's gradient was dropped.
      counted: optional bool tensor: count this step at all (False adds nothing).
    """
    with tf.device(self._device), tf.control_dependencies(after):
      stale = tf.constant(False) if stale is None else stale
      add = tf.stack([tf.constant(1, tf.int64), tf.cast(stale, tf.int64)])
      if counted is not None:
        add = add * tf.cast(counted, tf.int64)
      op = self.table.scatter_add(tf.IndexedSlices(tf.reshape(add, [1, 2]),
                                                   tf.constant([self.worker_index])))
      with tf.control_dependencies([op]):
        self.own_row = tf.gather(self.table.read_value(), self.worker_index)
    return op

  def wrap(self, train_op):
    """`train_op` that also counts this worker's step (asynchronous training)."""
    count = self.count([train_op])
    with tf.control_dependencies([count]):
      return tf.identity(train_op, name='train_op_counted')


class ClusterProgress:
  """The chief's view of its workers between two progress lines.

  `report(table, now)` takes a reading of WorkerStats.value (a num_workers x 2 array) at
  wall time `now` and returns (TensorBoard scalars, the log line); the first reading only
  sets the start (its scalars are empty, its line None).
  """

  def __init__(self, num_workers, sync):
    self.num_workers = num_workers
    self.sync = sync
    self._last = None
    self.rates = None

  def report(self, table, now):
    table = [[int(v) for v in row] for row in table]
    last, self._last = self._last, (table, now)
    if last is None:
      return {}, None
    seconds = max(1e-9, now - last[1])
    self.rates = [(row[STEPS] - old[STEPS]) / seconds for row, old in zip(table, last[0])]
    scalars = {'cluster/worker_%d/steps_per_sec' % i: rate
               for i, rate in enumerate(self.rates)}
    # The counts themselves too: exact where the rates are over the chief's wall time.
    scalars.update(('cluster/worker_%d/steps' % i, row[STEPS]) for i, row in enumerate(table))
    rates = ', '.join('%d: %.2f' % (i, rate) for i, rate in enumerate(self.rates))
    if not self.sync:
      return scalars, ('cluster: steps/sec by worker %s (asynchronous: every gradient '
                       'is applied, none dropped)' % rates)
    stale = [row[STALE] for row in table]
    for i, count in enumerate(stale):
      scalars['cluster/worker_%d/stale_gradients' % i] = count
    scalars['cluster/stale_gradients'] = sum(stale)
    which = ', '.join('worker %d: %d' % (i, n) for i, n in enumerate(stale) if n)
    return scalars, 'cluster: steps/sec by worker %s; stale gradients dropped: %d%s' % (
        rates, sum(stale), ' (%s)' % which if which else '')
