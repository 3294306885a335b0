"""The training loop: slim.learning.train's Supervisor loop, with a lifecycle that ends.

`supervised_train` runs the loop slim.learning.train runs (same Supervisor session
manager, init ops and `train_step_fn` protocol) with nothing beside the steps: the chief
saves between steps (training.checkpoint_saves) and the step itself fetches the summaries
when due (training.progress), so what is written belongs to one step; no Supervisor
service thread runs. It also changes what makes parameter-server jobs hang or crash at
the edges (tensorflow#7970, #5022, #11753, #13779; models#6566):

  * Non-chief workers poll for the chief's model every `recovery_wait_secs` (slim's
    Supervisor: 30 s).
  * Synchronous training uses deployment.sync_replicas (one token queue per worker, no
    gradient counted twice, no initial tokens: each of the first updates waits for every
    replica instead of letting the first worker up run alone); each worker reads the
    global step *after* its update.
  * At the end the chief closes the sync token queues (workers waiting for one more token
    end their loop) and closes its session *before* joining its threads, which cancels
    the chief queue runner still waiting for gradients: no "Coordinator stopped with
    threads still running ... sync_token_q".
  * A chief that restarts while the parameter servers still hold the model continues
    from them instead of restoring an older checkpoint over it (global_step never goes
    back; a synchronous job skips the step in flight, deployment.sync_replicas); with
    fresh parameter servers it restores the last checkpoint as before.
  * In a cluster, or reading from a tf.data service, a `Watchdog` ends a task that waits
    too long (a missing or dead task, no data worker left) with one line and exit status
    138, and unblocks a stopping task stuck in a step.
  * Workers without parameter servers (`owns_model`: --variable_update=replicated) each
    initialize (or the chief restores) their own copy of the model; the local init op
    then runs deployment.replicated's sync (worker 0's values to every worker and clone),
    and only the chief writes. Every step waits for every worker, so the watchdog names
    the silent one.
"""

import collections
import contextlib
import dataclasses

from absl import logging

from core import heap
from deployment.replicated import REPLICA_SYNC
from tf_compat import tf
from training.checkpoint_saves import CheckpointSaves
from training.loop_parts import ClusterRole, LoopGraph, LoopHooks, Saving
from training.supervisor import make_supervisor
from training.watchdog import EXIT_CLUSTER_FAILURE, Watchdog, flush_and_exit

__all__ = ['LoopTimeouts', 'supervised_train', 'LoopGraph', 'ClusterRole', 'Saving',
           'LoopHooks', 'Watchdog', 'EXIT_CLUSTER_FAILURE', 'flush_and_exit']


LoopOps = collections.namedtuple('LoopOps', [
    'init_op', 'ready_op', 'local_init_op', 'ready_for_local_init_op', 'global_ready_op',
    'step_after_train', 'queue_runner', 'rejoin_op', 'close_tokens', 'add_token',
    'sync_state'])


@dataclasses.dataclass(frozen=True)
class LoopTimeouts:
  """Seconds; 0 disables a timeout. See the --*_secs flags in training/config.py."""
  recovery_wait_secs: float = 30.0
  startup_timeout_secs: float = 0.0
  step_timeout_secs: float = 0.0
  stop_grace_secs: float = 30.0


def _sync_ops(sync_optimizer):
  """(chief queue runner, rejoin op, close tokens, add a stop token, state) of
  deployment.sync_replicas: per-worker tokens, so a fresh job needs no initial tokens;
  a chief that continues a job the parameter servers hold runs the rejoin op (it skips
  the step its predecessor may have died inside, see that module)."""
  return (sync_optimizer.get_chief_queue_runner(), sync_optimizer.rejoin_op,
          sync_optimizer.close_token_queues_op, sync_optimizer.add_stop_token_op,
          sync_optimizer.state_op)


def _chief_initialized_flag(global_step):
  """A variable only the chief's local init initializes, after init_op AND init_fn.

  The model counts as ready only once it is initialized: otherwise a worker would start
  as soon as init_op has run, computing its first gradients on random weights that the
  chief's fine-tune restore (init_fn) is about to overwrite. In no collection: never
  saved, never initialized by anyone else.
  """
  with tf.device(global_step.device):
    return tf.Variable(True, trainable=False, collections=[],
                       name='session_loop/chief_initialized')


def _loop_ops(train_op, global_step, is_chief, sync_optimizer, distributed,
              worker_stats=None):
  """The ops slim.learning.train builds, plus those of the lifecycle."""
  flag = _chief_initialized_flag(global_step)
  chief_made = [flag] + (sync_optimizer.ready_variables if sync_optimizer else [])
  chief_inits = [flag.initializer]
  if worker_stats is not None:  # Kept on the ps, initialized by the chief once.
    chief_made += worker_stats.variables
    chief_inits.append(worker_stats.initializer)
  with tf.name_scope('init_ops'):
    init_op = tf.global_variables_initializer()
    ready_op = tf.report_uninitialized_variables(
        tf.global_variables() + tf.local_variables() + chief_made)
    global_ready_op = None
    if distributed and is_chief:
      global_ready_op = tf.report_uninitialized_variables(tf.global_variables() + [flag])
    # The replicas' sync orders itself after the copies' initializers (its own control
    # inputs) and runs after init_op or the restore, as the local init op does.
    local_init_op = tf.group(tf.local_variables_initializer(), tf.tables_initializer(),
                             *((chief_inits if is_chief else []) +
                               tf.get_collection(REPLICA_SYNC)))
    ready_for_local_init_op = None
    if sync_optimizer is not None:
      # This orders only the new group op: the ops inside were built before, and the
      # local step's assign orders itself after its initializer (deployment.sync_replicas).
      with tf.control_dependencies([local_init_op]):
        local_init_op = tf.group(sync_optimizer.chief_init_op if is_chief
                                 else sync_optimizer.local_step_init_op)
      # local_step_init_op reads global_step: the chief must have initialized it.
      ready_for_local_init_op = tf.report_uninitialized_variables(tf.global_variables())
  with tf.control_dependencies([train_op]):
    step_after_train = tf.identity(global_step.read_value(), name='step_after_train')
  sync = (None,) * 5
  if sync_optimizer is not None:
    sync = _sync_ops(sync_optimizer)
  return LoopOps(init_op, ready_op, local_init_op, ready_for_local_init_op,
                 global_ready_op, step_after_train, *sync)


def _close_quietly(sess):
  try:
    sess.close()
  except Exception as error:  # pylint: disable=broad-except
    logging.warning('Closing the session: %s', str(error).splitlines()[0])


def _step_of(train_step_fn, sess, global_step):
  """The global step after the last step: the step function's reading when it keeps one
  (training.progress.ProgressStep's `last_global_step`), else read."""
  step = getattr(train_step_fn, 'last_global_step', None)
  return int(sess.run(global_step)) if step is None else step


@dataclasses.dataclass(frozen=True)
class _Stepping:
  """One training step as the loop calls it: `train_step_fn(sess, train_op, global_step,
  kwargs)` in slim.learning.train's protocol, and the global step after it."""
  sess: object
  train_step_fn: object
  graph: object   # LoopGraph
  kwargs: dict

  def step(self):
    return self.train_step_fn(self.sess, self.graph.train_op, self.graph.global_step,
                              self.kwargs)

  def global_step_after(self):
    return _step_of(self.train_step_fn, self.sess, self.graph.global_step)


def _run_steps(sv, stepping, watchdog, saves, stop_event, stop_vote=None):
  """Steps until the step function or the coordinator says stop, a stop is requested,
  or inputs end; between two steps the chief's `saves` may save. The graph's Python
  objects stay out of the cyclic collector's passes meanwhile (core.heap). With a
  `stop_vote` (deployment.replicated.StopVote) every worker stops after the step at whose
  end one of them had been asked to. -> True when a stop request ended the steps."""
  asked = lambda: stop_event is not None and stop_event.is_set()
  sess = stepping.sess
  with heap.frozen():
    try:
      while not sv.should_stop():
        _, should_stop = stepping.step()
        if stop_vote is not None:
          if asked():
            stop_vote.request(sess)
          if stop_vote.agreed(sess):
            logging.info('Stopping training: a worker was asked to stop')
            return True
        if watchdog:
          watchdog.beat()
        if not should_stop and saves is not None:
          saves.after_step(sess, stepping.global_step_after())
        # A stop requested during that save ends the run here, not one step later (with
        # a vote, at the next vote: the others are in the next step already).
        if should_stop or (stop_vote is None and asked()):
          logging.info('Stopping training')
          return asked()
    except tf.errors.OutOfRangeError as error:
      # The input ended, or the chief closed the sync token queue: training is over.
      logging.info('Training ended (%s)', str(error).splitlines()[0])
  return asked()


def _start_runners(sv, sess, is_chief, ops, rejoined):
  """Queue runners and the chief's sync token queue runner; -> their threads.

  `rejoined`: the chief continues a job the parameter servers hold (see _sync_ops).
  """
  runners = sv.start_queue_runners(sess)
  if is_chief and ops.queue_runner is not None:
    if rejoined:
      logging.info('Rejoining a synchronous job in progress: the step in flight is '
                   'skipped (its gradients may be lost with the old chief, or half taken)')
      sess.run(ops.rejoin_op)
    runners += sv.start_queue_runners(sess, [ops.queue_runner])
  return runners


def _stop(sv, sess, runners):
  """Stops the threads, then the session, without "threads still running".

  The chief's sync queue runner only ends when the session closes, which cancels its
  wait for gradients that no worker will send any more.
  """
  sv.request_stop()
  _close_quietly(sess)
  sv.stop(runners, close_summary_writer=True, ignore_live_threads=True)


def _begin(sv, sess, global_step, saves):
  """The chief's start: the session in the events and in the checkpoint saves; -> the
  global step."""
  step = int(sess.run(global_step))
  logging.info('Session ready at global step %d', step)
  if sv.summary_writer is not None:
    # TensorBoard drops the events at and after a START's step: those of an earlier run
    # after its checkpoint at `step`, which this run trains again. Its summary at `step`
    # (the step that ended there) is of the checkpointed weights' own batch: it stays.
    sv.summary_writer.add_session_log(tf.SessionLog(status=tf.SessionLog.START), step + 1)
  if saves is not None:
    saves.begin(step)
  return step


def _rejoins(train_step_fn, manager, step):
  """Whether a chief continuing a synchronous job (`manager.continued_from_servers`)
  runs the rejoin op, which skips the step in flight (the global step moves on by one).
  Not once the job reached its last step (ProgressStep.is_final): a chief killed after
  the last update, before its final save, would end the job one step past
  --max_number_of_steps."""
  rejoined = manager.continued_from_servers
  is_final = getattr(train_step_fn, 'is_final', None)
  if rejoined and is_final is not None and is_final(step):
    logging.info('The synchronous job already reached its last step (%d): nothing in '
                 'flight to skip', step)
    return False
  return rejoined


def _finish(sess, saves, finished, finish_fn, watchdog):
  """The chief's end: `finish_fn` (training finished and the step moved), final save."""
  if saves is None:
    return
  if finished and finish_fn is not None and saves.pending(sess):
    finish_fn(sess, watchdog.beat if watchdog else lambda: None)
  saves.final(sess)


def _supervise(graph, role, saving, timeouts):
  """-> (LoopOps, Supervisor, its session manager, the chief's CheckpointSaves or None).
  A worker that owns its model initializes it like the chief, but restores and writes
  nothing: the sync brings worker 0's model."""
  initializes = role.is_chief or role.owns_model
  on_servers = bool(role.master) and not role.owns_model
  with graph.train_op.graph.as_default():
    ops = _loop_ops(graph.train_op, graph.global_step, initializes, graph.sync_optimizer,
                    on_servers, graph.worker_stats)
  logdir = saving.logdir if role.is_chief else None
  sv, manager, checkpoint_saver = make_supervisor(
      ops, logdir, initializes, graph.global_step,
      graph.init_fn if role.is_chief else None, on_servers, timeouts)
  saves = None
  if logdir:
    saves = CheckpointSaves(checkpoint_saver, logdir, graph.global_step, saving.cadence())
  return ops, sv, manager, saves


def _watchdog(role, graph, timeouts, hooks):
  """The Watchdog, armed in a cluster (`role.master` set) or with a tf.data service
  (`hooks.input_state`); None otherwise."""
  if not (role.master or hooks.input_state):
    return None
  return Watchdog(timeouts, role, hooks, graph.sync_optimizer is not None)


def supervised_train(graph, train_step_fn, role, saving, session_config, timeouts,
                     hooks=LoopHooks()):
  """Trains like slim.learning.train (same protocol, no service threads); see module doc.

  `graph`, `role`, `saving`, `hooks`: training.loop_parts' LoopGraph, ClusterRole,
  Saving and LoopHooks. `train_step_fn(sess, train_op, global_step, kwargs)` gets kwargs
  {'step_after_train': the global step read after train_op, 'summary_writer': the
  chief's writer, or None}. `session_config`: the session's ConfigProto; `timeouts`:
  LoopTimeouts. -> True when training ran to its end, False when a stop request ended it.
  """
  ops, sv, manager, saves = _supervise(graph, role, saving, timeouts)
  watchdog = _watchdog(role, graph, timeouts, hooks)
  with watchdog or contextlib.nullcontext():
    if role.before_session is not None:
      role.before_session()
    # The watchdog owns the start-up timeout (it also covers a session creation that
    # waits for a missing parameter server, which max_wait_secs does not).
    sess = sv.prepare_or_wait_for_session(
        role.master, config=session_config, start_standard_services=False,
        max_wait_secs=float('inf'))
    runners = []
    try:
      if hooks.before_steps is not None:
        hooks.before_steps(sess)
      if watchdog:
        watchdog.enter('training', sess, ops.add_token, ops.sync_state)
      rejoins = _rejoins(train_step_fn, manager, _begin(sv, sess, graph.global_step, saves))
      runners = _start_runners(sv, sess, role.is_chief, ops, rejoins)
      stepping = _Stepping(sess, train_step_fn, graph, {
          'step_after_train': ops.step_after_train,
          'summary_writer': sv.summary_writer if saves else None})
      finished = not _run_steps(sv, stepping, watchdog, saves, hooks.stop_event,
                                role.stop_vote)
      if watchdog:
        watchdog.enter('finishing')
      _finish(sess, saves, finished, hooks.finish_fn, watchdog)
      if finished and role.is_chief and ops.close_tokens is not None:
        sess.run(ops.close_tokens)
    finally:
      if watchdog:
        watchdog.enter('finishing')
      _stop(sv, sess, runners)
  return finished
