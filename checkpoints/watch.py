"""Follows a training directory and hands out each new, complete checkpoint once.

    for checkpoint in watch_checkpoints(train_dir, last_step=1000, timeout=1800):
      evaluate(checkpoint)

Which checkpoints exist comes from the `checkpoint` state file (`paths`); a listed
checkpoint is still handed out only once its `.index` and every
`.data-0000i-of-0000N` shard exist and the index can be read, so a checkpoint being
written (or one copied in by hand) is never read half-written. Checkpoints are handed out
in step order, older ones too (a slow evaluation falls behind but skips nothing), unless
the trainer's Saver deleted them first (max_to_keep), which is logged.

The watch ends
  - after the checkpoint at `last_step` (or later) has been handed out;
  - after the checkpoint named by the trainer's end marker (`checkpoints.end_marker`,
    written once training has saved its last checkpoint) with status `finished` has been
    handed out, so no step count need be given;
  - or when `timeout` seconds pass without a new checkpoint. A marker with status
    `stopped` (SIGTERM, preemption) is logged once and the watch goes on until then: a
    stopped run is usually restarted, and its new checkpoints are handed out as well.
"""

import time

from absl import logging

from checkpoints.end_marker import END_MARKER_FILE, FINISHED, read_end_marker
from checkpoints.paths import checkpoint_step, is_complete, listed_checkpoints
from tf_compat import tf

__all__ = ['TRAINING_DONE_FILE', 'watch_checkpoints']

TRAINING_DONE_FILE = END_MARKER_FILE


def _finished(step, last_step, marker):
  if step is None:
    return False
  if last_step is not None and step >= last_step:
    return True
  return marker is not None and marker.status == FINISHED and step >= marker.global_step


def _log_stop(marker, reported):
  """Logs a stopped run's marker once per step it names."""
  if marker is None or marker.status == FINISHED or marker.global_step in reported:
    return
  reported.add(marker.global_step)
  logging.info('Training was stopped at step %d (SIGTERM or preemption); still watching '
               'for a restarted run until the timeout', marker.global_step)


def _new_checkpoints(train_dir, handed_out):
  """-> (complete checkpoints not yet handed out, oldest first; deleted ones).

  A listed checkpoint without its index, followed by a later listed one, was deleted by
  the trainer's Saver (it lists a checkpoint only once it is written). Any other
  incomplete checkpoint is being written: it and every later one wait.
  """
  ready, deleted = [], []
  listed = [p for p in listed_checkpoints(train_dir) if p not in handed_out]
  for position, prefix in enumerate(listed):
    if is_complete(prefix):
      ready.append(prefix)
    elif not tf.io.gfile.exists(prefix + '.index') and position + 1 < len(listed):
      deleted.append(prefix)
    else:
      logging.info('Waiting for %s to be complete', prefix)
      break
  return ready, deleted


def watch_checkpoints(train_dir, last_step=None, timeout=1800.0, poll_secs=5.0,
                      clock=time.monotonic, sleep=time.sleep):
  """Yields each new complete checkpoint prefix of `train_dir` once, in step order.

  Args:
    train_dir: the training directory (it may not exist yet).
    last_step: training's last global step; the watch ends after handing it out.
    timeout: seconds without a new checkpoint after which the watch ends.
    poll_secs: seconds between looks.
    clock, sleep: injectable for tests.
  """
  handed_out, stops_reported = set(), set()
  newest = None  # Highest step handed out.
  last_new = clock()
  while True:
    ready, deleted = _new_checkpoints(train_dir, handed_out)
    for prefix in deleted:
      handed_out.add(prefix)
      logging.warning('%s was deleted before it could be evaluated (the trainer keeps '
                      'only its newest checkpoints)', prefix)
    for prefix in ready:
      handed_out.add(prefix)
      yield prefix
      last_new = clock()
      step = checkpoint_step(prefix)
      newest = step if newest is None or (step or 0) > newest else newest
    # Checked on every look: the trainer's marker may come after its last checkpoint.
    marker = read_end_marker(train_dir)
    _log_stop(marker, stops_reported)
    if _finished(newest, last_step, marker):
      logging.info('Evaluated training\'s last step %d; watch done', newest)
      return
    if clock() - last_new >= timeout:
      logging.info('No new checkpoint in %s for %.0f s; watch done', train_dir, timeout)
      return
    sleep(poll_secs)
