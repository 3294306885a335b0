"""The training step handed to `slim.learning.train`, with honest progress lines.

slim's own step runs three session calls per step (train, should_log, should_stop); this
one runs one and decides the rest in Python. Every `log_every_n_steps` global steps it logs

    step 120: loss = 0.3124 (2451.3 examples/sec; 0.026 sec/step)

where examples/sec counts this worker's examples (per-clone batch x clones) over this worker's
steps since the previous line, so multi-clone runs are compared in examples, not in steps.
"""

import time

from absl import logging

__all__ = ['ProgressStep']


class ProgressStep:
  """A `train_step_fn` for slim.learning.train: (sess, train_op, global_step, kwargs)."""

  def __init__(self, examples_per_step, number_of_steps=None, log_every_n_steps=10,
               stop_event=None):
    """
    Args:
      examples_per_step: examples this worker processes per step (batch x clones).
      number_of_steps: stop once the global step reaches this (None: never).
      log_every_n_steps: progress line period in global steps (0: no lines).
      stop_event: optional threading.Event; when set, training stops at the next step.
    """
    self._examples_per_step = examples_per_step
    self._number_of_steps = number_of_steps
    self._log_every = log_every_n_steps
    self._stop_event = stop_event
    self._last_time = None
    self._steps_since_log = 0
    self.last_loss = None
    self.last_global_step = None
    self.examples_per_sec = None

  def __call__(self, sess, train_op, global_step, train_step_kwargs):
    del train_step_kwargs
    if self._last_time is None:
      self._last_time = time.time()
    loss, step = sess.run([train_op, global_step])
    # Local steps: with asynchronous workers the global step also moves for others.
    self._steps_since_log += 1
    self.last_loss, self.last_global_step = float(loss), int(step)
    if self._log_every and step % self._log_every == 0:
      self._log(step, loss)
    should_stop = bool(self._number_of_steps and step >= self._number_of_steps)
    if self._stop_event is not None and self._stop_event.is_set():
      should_stop = True
    return loss, should_stop

  def _log(self, step, loss):
    now = time.time()
    steps = self._steps_since_log
    elapsed = max(1e-9, now - self._last_time)
    self.examples_per_sec = steps * self._examples_per_step / elapsed
    logging.info('step %d: loss = %.4f (%.1f examples/sec; %.3f sec/step)',
                 step, loss, self.examples_per_sec, elapsed / steps)
    self._last_time, self._steps_since_log = now, 0
