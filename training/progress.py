"""The training step handed to `supervised_train` (training.session_loop), with honest
progress lines.

slim's own step runs three session calls per step (train, should_log, should_stop); this
one runs one and decides the rest in Python. Each time the global step crosses a multiple
of `log_every_n_steps` it logs

    step 120: loss = 0.3124 (2451.3 examples/sec; 0.026 sec/step)

where examples/sec counts this worker's examples (per-clone batch x clones) over this
worker's steps since the previous line, so multi-clone runs are compared in examples, not
in steps, and asynchronous workers (whose global step also moves for others) count only
their own work.
"""

import time

from absl import logging

__all__ = ['ProgressStep']


class ProgressStep:
  """A `train_step_fn` in slim.learning.train's protocol, which `supervised_train` keeps:
  (sess, train_op, global_step, kwargs)."""

  def __init__(self, examples_per_step, number_of_steps=None, log_every_n_steps=10,
               stop_event=None):
    """
    Args:
      examples_per_step: examples this worker processes per step (batch x clones).
      number_of_steps: stop once the global step reaches this (None: never).
      log_every_n_steps: progress line period in global steps (0: no lines).
      stop_event: optional threading.Event; when set, training stops before the next step.
    """
    self._examples_per_step = examples_per_step
    self._number_of_steps = number_of_steps
    self._log_every = log_every_n_steps
    self._stop_event = stop_event
    self._start_time = None
    self._last_time = None
    self._last_logged_step = None
    self._steps_since_log = 0
    self.local_steps = 0
    self.last_loss = None
    self.last_global_step = None
    self.examples_per_sec = None

  def _done(self, step):
    if self._stop_event is not None and self._stop_event.is_set():
      return True
    return bool(self._number_of_steps and step >= self._number_of_steps)

  def __call__(self, sess, train_op, global_step, train_step_kwargs):
    # The loop may pass the global step read after train_op: a synchronous worker then
    # sees the update its step waited for and does not start a step past the last.
    step_after_train = train_step_kwargs.get('step_after_train', global_step)
    if self._start_time is None:
      # slim calls the step before asking whether to stop: a run resumed at its last
      # step (or stopped before it began) must not train one step more.
      self.last_global_step = int(sess.run(global_step))
      self._last_logged_step = self.last_global_step
      self._start_time = self._last_time = time.time()
      if self._done(self.last_global_step):
        return self.last_loss, True
    loss, step = sess.run([train_op, step_after_train])
    self.local_steps += 1
    self._steps_since_log += 1
    self.last_loss, self.last_global_step = float(loss), int(step)
    if self._log_every and step // self._log_every > self._last_logged_step // self._log_every:
      self._log(step, loss)
    return loss, self._done(step)

  def _log(self, step, loss):
    now = time.time()
    steps = self._steps_since_log
    elapsed = max(1e-9, now - self._last_time)
    self.examples_per_sec = steps * self._examples_per_step / elapsed
    logging.info('step %d: loss = %.4f (%.1f examples/sec; %.3f sec/step)',
                 step, loss, self.examples_per_sec, elapsed / steps)
    self._last_time, self._steps_since_log, self._last_logged_step = now, 0, step

  def overall_examples_per_sec(self):
    """This worker's examples/sec over the whole run (None before any step)."""
    if not self.local_steps:
      return None
    elapsed = max(1e-9, time.time() - self._start_time)
    return self.local_steps * self._examples_per_step / elapsed
