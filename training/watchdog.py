"""The training loop's watchdog: a cluster task (or a trainer reading from a tf.data
service) that waits too long ends with one line and exit status 138 (training.session_loop
arms it; tensorflow#5022)."""

import contextlib
import os
import sys
import threading
import time

from absl import logging

from core import errors
from tf_compat import tf

__all__ = ['EXIT_CLUSTER_FAILURE', 'Watchdog', 'flush_and_exit']

EXIT_CLUSTER_FAILURE = errors.CLUSTER  # Kubeflow TFJob's ExitCode policy: user-defined retryable.


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

  def __init__(self, timeouts, role, hooks, sync, exit_fn=flush_and_exit,
               clock=time.monotonic):
    """`timeouts`: LoopTimeouts. `role`: the task's training.loop_parts.ClusterRole
    (is_chief, absent_tasks, owns_model: workers without ps all-reduce); `hooks`: its
    LoopHooks (stop_event, input_state); `sync`: synchronous replicas."""
    # Workers without ps: every phase waits for every worker.
    self._all_reduce = role.owns_model
    self._timeouts = timeouts
    self._input_state = hooks.input_state
    self._absent_tasks = role.absent_tasks
    self._stop_event = hooks.stop_event
    self._is_chief = role.is_chief
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
      if job == 'ps' or self._all_reduce:
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
    if self._all_reduce:
      return _all_reduce_timeout(phase, limit, missing)
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


def _all_reduce_timeout(phase, limit, missing):
  """The watchdog's line for workers without parameter servers (all-reduce)."""
  if phase == 'startup':
    return ('the training session was not ready after %g s (--startup_timeout_secs): '
            'workers without parameter servers start together (worker 0 leads the '
            'all-reduce group and sends its model to the others), so a worker is missing%s; '
            'start every task, or restart the job (docs/cluster.md)' % (limit, missing))
  return ('no training step %s for %g s (--step_timeout_secs): every step all-reduces the '
          'gradients of every worker, so a worker is missing (ended or frozen)%s; restart '
          'the job: it resumes from the chief\'s last checkpoint (docs/cluster.md)' % (
              'finished' if phase == 'training' else 'ended (final checkpoint, shutdown)',
              limit, missing))
