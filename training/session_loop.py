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
"""

import collections
import contextlib
import dataclasses
import os
import sys
import threading
import time

from absl import logging

from core import errors, heap
from tf_compat import tf
from training.cadence import Cadence
from training.checkpoint_saves import CheckpointSaves
from training.supervisor import make_supervisor

__all__ = ['LoopTimeouts', 'supervised_train', 'Watchdog', 'EXIT_CLUSTER_FAILURE',
           'flush_and_exit']

EXIT_CLUSTER_FAILURE = errors.CLUSTER  # Kubeflow TFJob's ExitCode policy: user-defined retryable.

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
    local_init_op = tf.group(tf.local_variables_initializer(), tf.tables_initializer(),
                             *(chief_inits if is_chief else []))
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


def _run_steps(sv, sess, train_step_fn, train_op, global_step, kwargs, watchdog, saves,
               stop_event):
  """Steps until the step function or the coordinator says stop, a stop is requested,
  or inputs end; between two steps the chief's `saves` may save. The graph's Python
  objects stay out of the cyclic collector's passes meanwhile (core.heap)."""
  with heap.frozen():
    try:
      while not sv.should_stop():
        _, should_stop = train_step_fn(sess, train_op, global_step, kwargs)
        if watchdog:
          watchdog.beat()
        if not should_stop and saves is not None:
          saves.after_step(sess, _step_of(train_step_fn, sess, global_step))
        # A stop requested during that save ends the run here, not one step later.
        if should_stop or (stop_event is not None and stop_event.is_set()):
          logging.info('Stopping training')
          return
    except tf.errors.OutOfRangeError as error:
      # The input ended, or the chief closed the sync token queue: training is over.
      logging.info('Training ended (%s)', str(error).splitlines()[0])


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


def supervised_train(train_op, logdir, train_step_fn, *, master, is_chief, global_step,
                     init_fn, save_interval_secs, save_interval_steps, sync_optimizer,
                     session_config, timeouts, stop_event=None, worker_stats=None,
                     finish_fn=None, before_steps=None, absent_tasks=None,
                     input_state=None):
  """Trains like slim.learning.train (same protocol, no service threads); see module doc.

  `train_step_fn(sess, train_op, global_step, kwargs)` gets kwargs {'step_after_train':
  the global step read after train_op, 'summary_writer': the chief's writer, or None}. The
  chief saves to `logdir` between steps (every `save_interval_steps` global steps or
  `save_interval_secs`, 0 = off; training.cadence) and at the end. `finish_fn(sess,
  beat)`: run on the chief after the last step when training finished (not stopped) and
  the global step moved, before the final save (precise batch norm); `beat()` re-arms
  the watchdog. `before_steps(sess)`: run once the session is ready, before the first
  step, under the start-up timeout (training.cluster_agreement's check of the chief's
  settings). The Watchdog is armed in a cluster (`master` set) or with `input_state` (->
  '' or '; why no input comes'); its time-out line names the tasks `absent_tasks()` finds
  (deployment.cluster.ps_cluster.absent_tasks). `worker_stats`: optional WorkerStats. -> True when
  training ran to its end (steps or inputs), False when `stop_event` ended it."""
  with train_op.graph.as_default():
    ops = _loop_ops(train_op, global_step, is_chief, sync_optimizer, bool(master),
                    worker_stats)
  sv, manager, checkpoint_saver = make_supervisor(ops, logdir, is_chief, global_step,
                                                  init_fn, bool(master), timeouts)
  saves = None
  if is_chief and logdir:
    saves = CheckpointSaves(checkpoint_saver, logdir, global_step,
                            Cadence(save_interval_steps, save_interval_secs))
  watchdog = (Watchdog(timeouts, stop_event, is_chief, sync_optimizer is not None,
                       absent_tasks=absent_tasks, input_state=input_state)
              if master or input_state else None)
  with watchdog or contextlib.nullcontext():
    # The watchdog owns the start-up timeout (it also covers a session creation that
    # waits for a missing parameter server, which max_wait_secs does not).
    sess = sv.prepare_or_wait_for_session(
        master, config=session_config, start_standard_services=False,
        max_wait_secs=float('inf'))
    runners = []
    try:
      if before_steps is not None:
        before_steps(sess)
      if watchdog:
        watchdog.enter('training', sess, ops.add_token, ops.sync_state)
      rejoins = _rejoins(train_step_fn, manager, _begin(sv, sess, global_step, saves))
      runners = _start_runners(sv, sess, is_chief, ops, rejoins)
      _run_steps(sv, sess, train_step_fn, train_op, global_step,
                 {'step_after_train': ops.step_after_train,
                  'summary_writer': sv.summary_writer if saves else None},
                 watchdog, saves, stop_event)
      finished = not (stop_event is not None and stop_event.is_set())
      if watchdog:
        watchdog.enter('finishing')
      _finish(sess, saves, finished, finish_fn, watchdog)
      if finished and is_chief and ops.close_tokens is not None:
        sess.run(ops.close_tokens)
    finally:
      if watchdog:
        watchdog.enter('finishing')
      _stop(sv, sess, runners)
  return finished


def flush_and_exit(code):
  """Flushes output and ends the process with `code`, skipping interpreter teardown.

  TensorFlow's gRPC server has no clean shutdown (GrpcServer::Stop is unimplemented),
  tearing the interpreter down around one takes seconds, and a thread blocked in a
  TensorFlow call cannot be stopped any other way.
  """
  for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(Exception):
      stream.flush()
  with contextlib.suppress(Exception):
    logging.flush()
  os._exit(code)  # pylint: disable=protected-access


class Watchdog:
  """Ends a cluster task that waits too long, with one clear line (tensorflow#5022).

  Phases: 'startup' (until the session is ready), 'training' (each finished step re-arms
  the step timeout), 'finishing' (final save and shutdown, also under the step timeout).
  A step blocked inside TensorFlow cannot be interrupted from Python, so on a timeout the
  watchdog prints `error: <reason>` and ends the process with status 138: restarted by
  its orchestrator, the task rejoins (a worker) or resumes (the chief).

  On a stop request (`stop_event`, set by SIGTERM/SIGINT) during start-up the task ends
  at once with status 0: it has trained nothing. During training, a step that has not
  ended `stop_grace_secs` after the request is unblocked with one sync token (a
  synchronous step waits for a token that a stopped peer will never help produce); if it
  still has not ended after another `stop_grace_secs`, the task ends: status 0 for a
  non-chief worker, 138 for the chief (it could not save).
  """

  POLL_SECS = 0.2
  STATE_TIMEOUT_SECS = 5.0  # Reading the synchronous state from a parameter server.

  def __init__(self, timeouts, stop_event, is_chief, sync, exit_fn=flush_and_exit,
               clock=time.monotonic, absent_tasks=None, input_state=None):
    self._timeouts = timeouts
    self._input_state = input_state
    self._absent_tasks = absent_tasks
    self._stop_event = stop_event
    self._is_chief = is_chief
    self._sync = sync
    self._exit = exit_fn
    self._clock = clock
    self._lock = threading.Lock()
    self._phase = 'startup'
    self._since = clock()
    self._stop_seen = None
    self._unblock = None
    self._unblocked = False
    self._state = None
    self._done = threading.Event()
    self._thread = None

  def __enter__(self):
    self._thread = threading.Thread(target=self._watch, name='watchdog', daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc_info):
    self._done.set()
    self._thread.join()

  def enter(self, phase, sess=None, unblock_op=None, state_op=None):
    """`state_op`: deployment.sync_replicas' state, read for a synchronous time-out."""
    with self._lock:
      if phase != self._phase:
        self._phase, self._since = phase, self._clock()
      if sess is not None and unblock_op is not None:
        self._unblock = lambda: sess.run(unblock_op)
      if sess is not None and state_op is not None:
        self._state = lambda: sess.run(state_op, options=tf.RunOptions(
            timeout_in_ms=int(1000 * self.STATE_TIMEOUT_SECS)))

  def beat(self):
    with self._lock:
      self._since = self._clock()

  def _watch(self):
    while not self._done.wait(self.POLL_SECS):
      verdict = self.check()
      if verdict is not None and not self._done.is_set():
        code, message = verdict
        if code:
          print('error: %s' % message, file=sys.stderr)
        logging.info('Watchdog: %s; exiting with status %d', message, code)
        self._exit(code)
        return

  def check(self):
    """(exit status, reason) when the task must end now, else None; may unblock."""
    with self._lock:
      now, phase, since = self._clock(), self._phase, self._since
    stop = self._stop_verdict(now, phase)
    if stop is not None:
      return stop
    limit = (self._timeouts.startup_timeout_secs if phase == 'startup'
             else self._timeouts.step_timeout_secs)
    if limit and now - since > limit:
      return EXIT_CLUSTER_FAILURE, self._timeout_reason(phase, limit)
    return None

  def _stop_verdict(self, now, phase):
    if self._stop_event is None or not self._stop_event.is_set():
      return None
    if self._stop_seen is None:
      self._stop_seen = now
    if phase == 'startup':
      return 0, 'stopped by a signal before training began'
    waited, grace = now - self._stop_seen, self._timeouts.stop_grace_secs
    if phase == 'training' and waited > grace and self._unblock and not self._unblocked:
      self._unblocked = True
      logging.info('Stop requested %.0f s ago and the step has not ended: adding a sync '
                   'token to unblock it', waited)
      with contextlib.suppress(Exception):
        self._unblock()
    if phase == 'training' and waited > 2 * grace:
      if self._is_chief:
        return EXIT_CLUSTER_FAILURE, ('stopped by a signal, but the step in progress did '
                                      'not end within %g s: no final checkpoint' % (2 * grace))
      return 0, 'stopped by a signal; the step in progress did not end within %g s' % (
          2 * grace)
    return None

  def _missing(self, phase):
    """'; not answering: worker 1 (h:p), ...' of the tasks this phase waits for (the
    parameter servers; at start-up a worker also waits for the chief, a synchronous
    step for every worker), or ''."""
    if self._absent_tasks is None:
      return ''

    def waited_for(job, index):
      if job == 'ps':
        return True
      if phase == 'startup':
        return index == 0 and not self._is_chief
      return phase == 'training' and self._sync

    names = ['%s %d (%s)' % ('the chief, worker' if (job, index) == ('worker', 0) else job,
                              index, host)
             for job, index, host in self._absent_tasks() if waited_for(job, index)]
    return '; not answering: %s' % ', '.join(names) if names else ''

  def _sync_state(self):
    """'; at the time-out: global step 19, gradients held by the 5 accumulators 1 to 1,
    tokens waiting per worker 0,0, step of each worker's last gradient 19,-1', or '' when
    there is no state to read or the parameter server does not answer in time."""
    if self._state is None:
      return ''
    try:
      state = self._state()
    except Exception:  # pylint: disable=broad-except  (a silent ps: the line says enough)
      return ''
    join = lambda values: ','.join(str(int(v)) for v in values)
    held = state['held']
    return ('; at the time-out: global step %d, gradients held by the %d accumulators %d to '
            '%d, tokens waiting per worker %s, step of each worker\'s last gradient %s' % (
                state['global_step'], len(held), min(held, default=0), max(held, default=0),
                join(state['tokens']), join(state['sent'])))

  def _timeout_reason(self, phase, limit):
    missing = self._missing(phase)
    if phase == 'startup':
      who = ('a parameter server does not answer' if self._is_chief else
             'the chief (worker 0) has not initialized the model, or a parameter server '
             'does not answer')
      return ('the training session was not ready after %g s (--startup_timeout_secs): '
              '%s%s; start the missing task (docs/cluster.md)' % (limit, who, missing))
    inputs = self._input_state() if self._input_state and phase == 'training' else ''
    if inputs:
      return ('no training step finished for %g s (--step_timeout_secs): no input comes%s%s'
              % (limit, inputs, missing))
    if self._input_state and phase == 'training' and not missing and not self._sync:
      # The service answers with data workers, and no parameter server is known to be
      # silent: blaming one (the line below) was wrong when a restarted dispatcher had not
      # yet been rejoined, and outside a cluster there is none.
      return ('no training step finished for %g s (--step_timeout_secs): the step waits for '
              'its input from the tf.data service, whose dispatcher and data workers answer: '
              'a restarted dispatcher not yet rejoined, or data workers too slow for the '
              'step%s (docs/data_service.md)' % (
                  limit, '' if self._absent_tasks is None else
                  '; every parameter server answers too, unless one hangs'))
    if phase == 'finishing':
      return ('the end of training (final checkpoint, shutdown) did not finish within %g s '
              '(--step_timeout_secs): a parameter server does not answer%s' % (limit, missing))
    if self._sync:
      return ('no training step finished for %g s (--step_timeout_secs): synchronous '
              'training waits for --replicas_to_aggregate gradients and for the chief\'s '
              'update each step, so a worker is missing (never started, or ended) or a '
              'parameter server hangs%s%s; start the missing task, it rejoins '
              '(docs/cluster.md)' % (limit, missing, self._sync_state()))
    return ('no training step finished for %g s (--step_timeout_secs): a parameter server '
            'does not answer%s (docs/cluster.md)' % (limit, missing))
