"""Checkpoints of whole steps: the chief saves between training steps, never beside one.

`CheckpointSaves` is called by the loop (training.session_loop) after each step: it saves
when its `Cadence` (--save_interval_steps, --save_interval_secs) is due, and once at the
end. Nothing runs in a thread, so a checkpoint holds the variables of one global step,
with no update half applied (the Supervisor's checkpoint thread, and slim.learning.train's,
saved concurrently with the steps). A file, once written, never changes: there is no save
at start, a step already saved is not saved again (a resumed run does not rewrite the
checkpoint it resumed from), and the `checkpoint` state file keeps its earlier entries
(paths and timestamps) when a resumed run adds its own. The Saver still deletes the
oldest checkpoint beyond its max_to_keep (5), as slim's does.
"""

import os

from absl import logging

from tf_compat import tf

__all__ = ['CheckpointSaves', 'CHECKPOINT_PREFIX']

CHECKPOINT_PREFIX = 'model.ckpt'


class CheckpointSaves:
  """The chief's checkpoints in `logdir`: `begin`, then `after_step` per step, `final`."""

  def __init__(self, saver, logdir, global_step, cadence):
    self._saver = saver
    self._logdir = logdir
    self._prefix = os.path.join(logdir, CHECKPOINT_PREFIX)
    self._global_step = global_step
    self._cadence = cadence
    self._saved = None

  def begin(self, step):
    """The session is ready at global `step` (restored, initialized or continued)."""
    state = tf.train.get_checkpoint_state(self._logdir)
    if state is not None:
      paths = list(state.all_model_checkpoint_paths)
      stamps = list(state.all_model_checkpoint_timestamps)
      if len(stamps) == len(paths):  # As written: the earlier entries stay byte-equal.
        self._saver.set_last_checkpoints_with_time(list(zip(paths, stamps)))
      else:
        self._saver.recover_last_checkpoints(paths)
    if tf.io.gfile.exists('%s-%d.index' % (self._prefix, step)):
      self._saved = step
    self._cadence.start(step)

  def after_step(self, sess, step):
    """Between two steps: saves if the cadence is due at global `step`."""
    if self._cadence.due(step):
      self._save(sess, 'timed')

  def pending(self, sess):
    """Whether the global step moved since the last checkpoint of this directory."""
    return int(sess.run(self._global_step)) != self._saved

  def final(self, sess):
    """The checkpoint at the end; none when the step has not moved since the last."""
    if self._save(sess, 'final') is None:
      logging.info('No final save: %s-%d already holds this global step', self._prefix,
                   self._saved)

  def _save(self, sess, why):
    step = int(sess.run(self._global_step))
    if step == self._saved:
      return None
    logging.info('Saving the %s checkpoint %s-%d', why, self._prefix, step)
    path = self._saver.save(sess, self._prefix, global_step=step)
    self._saved = step
    self._cadence.done(step)
    return path
