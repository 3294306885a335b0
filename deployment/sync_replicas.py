"""Synchronous replicas: every update is the mean of one gradient per worker at the step.

`SyncReplicasOptimizer` keeps the interface of `tf.train.SyncReplicasOptimizer` (wrap an
optimizer; `apply_gradients` returns the worker's train op; the chief runs
`get_chief_queue_runner()` and `chief_init_op`, the others `local_step_init_op`, once
the global variables are initialized) and
changes the one mechanism that breaks the promise "N synchronous workers of batch b
update like one worker of batch N x b" under unfriendly timings.

TF's optimizer hands out the permission to compute the next gradient through ONE token
queue shared by all workers: after each update the chief enqueues N tokens, and any
worker may take any of them. A worker that is descheduled between sending its gradient
and taking its token lets a fast worker take two tokens and send two gradients for the
same step; the accumulators count gradients, not workers, so the update is the mean of
the fast worker's two batches and the slow worker's gradient arrives stale. Here:

  * Each worker has its own token queue. After an update the chief puts one token, the
    new global step, in every worker's queue; a worker waits in its own queue for a token
    newer than the step it just sent a gradient for (older ones, left by an update it
    missed or by a stop, are skipped) and then computes at the current global step.
  * The parameter servers remember the last step each worker sent a gradient for
    (`submitted`, not checkpointed). A gradient for a step its worker already sent one
    for is labelled stale (-1) and dropped by the accumulators: a restarted worker whose
    predecessor sent its gradient just before dying cannot count twice. The step is
    claimed once all of the worker's gradients are on the parameter servers and before
    any accumulator applies one (`_claim`), so a worker killed half-way through sending
    leaves no accumulator holding a gradient its restart would send again.
  * A chief that rejoins a job the parameter servers still hold (`rejoin_op`) cannot
    know whether its predecessor died inside an update: the gradients may have been
    taken and lost, or may still sit in the accumulators beside gradients of the other
    workers that cannot be told apart. It skips the step in flight: gradients for it are
    discarded, the global step advances by one without changing any weight, and every
    worker gets a token for the new step. global_step never goes back and no update mixes
    steps or counts a worker twice.

Each update therefore averages gradients of distinct workers, all computed at the
update's step: with `replicas_to_aggregate == total_num_replicas` it is exactly the big
batch; with backup workers the late ones are dropped, never counted later. The
accumulators, and the record beside them of how many gradients each worker gave for which
step (with `trace_path`, one line per update: `read_trace`), are
deployment/sync_accumulators.py. From the same record the update sets
`last_taken`, the step of the last gradient it took from each worker: a worker whose
token has come knows from it whether its gradient was taken or dropped, and counts the
step in `worker_stats` (deployment.worker_stats), which the chief shows.
"""

from deployment.sync_accumulators import (Accumulators, TraceLine, read_trace,
                                          record_per_worker, trace_op)
from deployment.wrapped_optimizer import WrappedOptimizer
from tf_compat import tf

__all__ = ['SyncReplicasOptimizer', 'TraceLine', 'read_trace', 'STOP_TOKEN']

STOP_TOKEN = -1  # Wakes a worker waiting for a token without letting it start a new step.
_STALE = -1      # A local step below every accumulator's: the gradient is dropped.


class SyncReplicasOptimizer(WrappedOptimizer):
  """Drop-in for `tf.train.SyncReplicasOptimizer` with per-worker tokens (module doc).

  Args:
    opt: the optimizer that applies the aggregated gradients.
    replicas_to_aggregate: gradients averaged per update (<= total_num_replicas; the
      others are backup workers).
    total_num_replicas: workers.
    worker_index: this worker's task index (its token queue and its `submitted` entry).
    variable_averages, variables_to_average: as TF's, averaged after each update; the
      variables may be a callable, called in `apply_gradients` (when they exist).
    trace_path: a file the chief appends one line per update to (None: no trace).
    worker_stats: optional deployment.worker_stats.WorkerStats: each finished step
      counts in it, with whether an update took its gradient (`last_taken`).
  """

  def __init__(self, opt, replicas_to_aggregate, total_num_replicas, worker_index,
               variable_averages=None, variables_to_average=None, trace_path=None,
               worker_stats=None, name='sync_replicas'):
    if not 1 <= replicas_to_aggregate <= total_num_replicas:
      raise ValueError('replicas_to_aggregate=%d must be in [1, total_num_replicas=%d]'
                       % (replicas_to_aggregate, total_num_replicas))
    if not 0 <= worker_index < total_num_replicas:
      raise ValueError('worker_index=%d must be in [0, %d)' % (worker_index,
                                                               total_num_replicas))
    super().__init__(opt, name)
    self._replicas_to_aggregate = replicas_to_aggregate
    self._total = total_num_replicas
    self._worker = worker_index
    self._variable_averages = variable_averages
    self._variables_to_average = variables_to_average
    self._trace_path = trace_path
    self._worker_stats = worker_stats
    self._accumulators = Accumulators(replicas_to_aggregate)
    self._queues = None
    self._global_step = None
    self._local_step = None
    self._worker_device = None
    self._submitted = None
    self._last_taken = None
    self._chief_queue_runner = None
    self.chief_init_op = self.local_step_init_op = self.state_op = None

  @property
  def replicas_to_aggregate(self):
    return self._replicas_to_aggregate

  @property
  def total_num_replicas(self):
    return self._total

  @property
  def ready_variables(self):
    """Variables the chief's local init creates; a worker waits until they exist."""
    return [self._submitted, self._last_taken]

  def get_chief_queue_runner(self):
    if self._chief_queue_runner is None:
      raise ValueError('apply_gradients must be called before get_chief_queue_runner')
    return self._chief_queue_runner

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """Sends this worker's gradients; returns the op that waits for the next step.

    Also builds the chief's update (its queue runner), the init ops and the lifecycle
    ops (`rejoin_op`, `close_token_queues_op`, `add_stop_token_op`).
    """
    grads_and_vars = list(grads_and_vars)
    if not grads_and_vars:
      raise ValueError('apply_gradients needs at least one (gradient, variable) pair')
    if global_step is None:
      raise ValueError('a global step is required: it tells current gradients from stale')
    self._global_step = global_step
    self._build_state(global_step)
    with tf.device(self._worker_device):
      step = self._local_step.read_value()
    grads_and_vars = [(_on_device(grad, var.device), var) for grad, var in grads_and_vars]
    label = self._claim(step, grads_and_vars)
    sends, aggregated = [], []
    with tf.name_scope(name or self._name):
      for grad, var in grads_and_vars:
        send, mean = self._accumulators.gradient(grad, var, label)
        sends.extend([send] if send is not None else [])
        aggregated.append((mean, var))
      record_sends, record = self._accumulators.record(self._worker, self._total, label,
                                                       global_step.device)
    with tf.device(global_step.device), tf.control_dependencies(sends + record_sends):
      token, next_step = self._wait_for_next_step(step)
    with tf.device(self._worker_device):
      train_op = self._local_step.assign(next_step, read_value=False)
    if self._worker_stats is not None:
      train_op = tf.group(train_op, self._count_step(token, label))
    self._build_chief_ops(aggregated, record)
    return train_op

  def _count_step(self, token, label):
    """Counts this step in worker_stats once its token has come: its gradient was taken
    when the last update that took one of this worker's gradients took it for `label`.
    A stop token leaves it uncounted (no update decided it)."""
    # All on the parameter server: no round trip through the worker after the token.
    with tf.device(self._global_step.device), tf.control_dependencies([token]):
      last = tf.gather(self._last_taken.read_value(), self._worker)
      taken = tf.logical_and(label >= 0, tf.equal(last, label))
      return self._worker_stats.count([token], stale=tf.logical_not(taken),
                                      counted=token >= 0)

  # ---------------------------------------------------------------- state and tokens

  def _build_state(self, global_step):
    dtype = global_step.dtype.base_dtype
    self._worker_device = tf.no_op(name='sync_local_anchor').device  # Never a ps.
    with tf.device(self._worker_device):
      self._local_step = tf.Variable(0, trainable=False, dtype=dtype,
                                     collections=[tf.GraphKeys.LOCAL_VARIABLES],
                                     name='sync_rep_local_step')
    with tf.device(global_step.device), tf.name_scope('sync_replicas_state'):
      # Not in any collection: never saved, so a restore cannot bring back old steps.
      self._submitted = tf.Variable(tf.fill([self._total], tf.constant(-1, dtype)),
                                    trainable=False, collections=[], name='submitted')
      # The step of the last gradient of each worker that an update took (the record).
      self._last_taken = tf.Variable(tf.fill([self._total], tf.constant(-1, dtype)),
                                     trainable=False, collections=[], name='last_taken')
      self._queues = [tf.queue.FIFOQueue(-1, dtype, shapes=[], name='token_q_w%d' % w,
                                         shared_name='sync_token_q_w%d' % w)
                      for w in range(self._total)]
    # After the variable's initializer: a local init op runs both in one session.run
    # (tf.local_variables_initializer() holds it), and control dependencies added there
    # order only a new op, not this one. Unordered, the initializer's 0 landed after the
    # global step in about 3 % of runs: on a resume, the worker's gradient was for step 0,
    # dropped as stale, and it waited for a token that no update would give (a deadlock
    # the watchdog ended with 138).
    with tf.device(self._worker_device), tf.control_dependencies(
        [self._local_step.initializer]):
      self.local_step_init_op = self._local_step.assign(global_step.read_value(),
                                                        read_value=False)

  def _claim(self, step, grads_and_vars):
    """This gradient's label: its local step, or _STALE when this worker already sent
    one for that step; `submitted` records the step before any accumulator gets it.

    Every gradient is first on its parameter server (the sends are in flight during the
    backward pass), then the step is claimed, then the accumulators apply: a worker that
    dies before all its gradients have arrived applied none (its restart sends them for
    that step), and once they have all arrived nothing on the worker's side can stop the
    parameter servers from applying them. So a worker never gives an accumulator two
    gradients for one step, even when it is killed half-way through sending them.
    """
    arrived = [t for grad, _ in grads_and_vars if grad is not None
               for t in ([grad.values, grad.indices] if isinstance(grad, tf.IndexedSlices)
                         else [grad])]
    with tf.device(self._global_step.device), tf.control_dependencies(arrived):
      already = tf.gather(self._submitted.read_value(), self._worker)
      label = tf.where(already < step, step, tf.constant(_STALE, step.dtype))
      with tf.control_dependencies([label]):
        marked = self._submitted.scatter_max(tf.IndexedSlices(
            tf.reshape(step, [1]), tf.constant([self._worker])))
      with tf.control_dependencies([marked]):
        return tf.identity(label, name='gradient_label')

  def _wait_for_next_step(self, current):
    """Dequeues this worker's tokens until one is newer than its step (or a stop).

    Returns (the token, the step to compute next): the global step now (the newest,
    at least the token), or the same step after a stop token (its gradient would be
    dropped).
    """
    queue = self._queues[self._worker]
    stale = lambda token: tf.logical_and(token <= current, token >= 0)
    token = tf.while_loop(stale, lambda _: queue.dequeue(), [queue.dequeue()],
                          back_prop=False, name='wait_for_token')
    with tf.control_dependencies([token]):
      now = self._global_step.read_value()
    return token, tf.where(token < 0, current, tf.maximum(token, now))

  # ---------------------------------------------------------------- the chief's ops

  def _build_chief_ops(self, aggregated, record):
    global_step = self._global_step
    with tf.device(global_step.device):
      update = self._opt.apply_gradients([(g, v) for g, v in aggregated if g is not None],
                                         global_step)
      done = tf.group(update, *record)  # The record is taken with the gradients.
      with tf.control_dependencies([done]):
        done = self._mark_taken(record)
      if self._variable_averages is not None:
        averaged = self._variables_to_average
        with tf.control_dependencies([done]):
          done = self._variable_averages.apply(averaged() if callable(averaged)
                                               else averaged)
    if self._trace_path:
      with tf.control_dependencies([done]):
        done = trace_op(record, global_step, self._trace_path)
    # Tokens last: a worker (and so the chief's final save) sees the update complete.
    with tf.device(global_step.device), tf.control_dependencies([done]):
      done = self._hand_out_tokens()
    with tf.device(global_step.device):
      runner_queue = tf.queue.FIFOQueue(1, tf.int32, shapes=[], name='sync_runner_q')
    self._chief_queue_runner = tf.train.QueueRunner(runner_queue, [done])
    with tf.control_dependencies([self.local_step_init_op]):
      init = [self._initialize_submitted(),
              self._accumulators.set_global_step(global_step.read_value())]
    self.chief_init_op = tf.group(*init, name='sync_chief_init')
    self._build_lifecycle_ops()

  def _hand_out_tokens(self):
    # A copy: a read of a (ref) variable shares its buffer, and a queue holds the tensor
    # it was given, so an uncopied token read the global step as it was when a worker
    # took it. An old token taken just after the next update's increment, before that
    # update handed out its own, then let the worker leave its wait early (its step
    # counted stale, and the next gradient sent before the update had finished).
    step = tf.raw_ops.Snapshot(input=self._global_step.read_value())
    return tf.group(*[q.enqueue(step) for q in self._queues], name='hand_out_tokens')

  def _mark_taken(self, record):
    """`last_taken` of each worker the update took a gradient from: that gradient's step."""
    counts, steps = record_per_worker(record)
    steps = tf.cast(steps, self._last_taken.dtype.base_dtype)
    return self._last_taken.assign(tf.where(counts > 0, steps, self._last_taken.read_value()),
                                   read_value=False)

  def _initialize_submitted(self):
    """Initializes `submitted` and `last_taken` once per parameter-server lifetime (a
    rejoining chief keeps what the workers sent)."""
    dtype = self._global_step.dtype.base_dtype
    state = (self._submitted, self._last_taken)

    def initialize():  # Built inside the branch, so it runs only when taken.
      return tf.group(*[v.assign(tf.fill([self._total], tf.constant(-1, dtype)))
                        for v in state])
    with tf.device(self._global_step.device):
      return tf.cond(tf.is_variable_initialized(self._submitted), tf.no_op, initialize)

  def _build_lifecycle_ops(self):
    """rejoin_op (the chief, continuing a job), close_token_queues_op (the chief, at the
    end: waiting workers end), add_stop_token_op (this worker: unblock a stopping step)."""
    global_step = self._global_step
    with tf.device(global_step.device), tf.name_scope('sync_lifecycle'):
      skipped = global_step.read_value() + 1
      # Gradients in flight for the current step arrive stale from here on ...
      block = self._accumulators.set_global_step(skipped)
      with tf.control_dependencies([block]):
        discard = self._accumulators.discard()  # ... and those already in are dropped.
      with tf.control_dependencies([discard]):
        realign = self._accumulators.set_global_step(skipped)  # A take advanced them again.
      with tf.control_dependencies([realign]):
        advance = global_step.assign(skipped, read_value=False)
      with tf.control_dependencies([advance]):
        tokens = self._hand_out_tokens()
      with tf.control_dependencies([tokens]):
        now = global_step.read_value()
    with tf.device(self._worker_device):
      self.rejoin_op = self._local_step.assign(now, read_value=False)
    with tf.device(global_step.device), tf.name_scope('sync_lifecycle'):
      self.close_token_queues_op = tf.group(*[q.close() for q in self._queues],
                                            name='close_token_queues')
      self.add_stop_token_op = self._queues[self._worker].enqueue(
          tf.constant(STOP_TOKEN, global_step.dtype.base_dtype), name='add_stop_token')
      self.state_op = self._state_op()

  def _state_op(self):
    """What a synchronous step waits on, for the watchdog's time-out line (all on the
    parameter servers): {'global_step', 'held': the gradients each accumulator holds,
    'tokens': each worker's tokens waiting, 'sent': the step of each worker's last
    gradient (-1: none since the parameter servers started)}."""
    return {'global_step': self._global_step.read_value(),
            'held': self._accumulators.num_accumulated(),
            'tokens': tf.stack([q.size() for q in self._queues]),
            'sent': self._submitted.read_value()}


def _on_device(grad, device):
  """`grad` (a Tensor, IndexedSlices or None) read onto `device`."""
  if grad is None:
    return None
  with tf.device(device):
    if isinstance(grad, tf.IndexedSlices):
      return tf.IndexedSlices(tf.identity(grad.values), tf.identity(grad.indices),
                              grad.dense_shape)
    return tf.identity(grad)
