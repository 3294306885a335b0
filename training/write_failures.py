"""A train_dir that cannot be written (full disk, no permission, read-only mount) ends the
run with one line instead of a 160-line traceback:

    error: could not write /runs/x/model.ckpt-900.data-00000-of-00001 (No space left on
    device); the last good checkpoint is /runs/x/model.ckpt-600 (temporary files removed);
    free space and run the same command again to resume from it

TensorFlow's Saver writes each file under a temporary name (`*.tempstate*`) and renames it
when complete, and updates the `checkpoint` state file only after a whole checkpoint is in
place: the checkpoint the state file names is intact. The temporary files a failed save
leaves are removed here.
"""

import os
import re
import threading

from absl import logging

from checkpoints import paths
from tf_compat import tf

__all__ = ['WRITE_ERRORS', 'describe_write_failure', 'quiet_thread_write_errors']

WRITE_ERRORS = (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                tf.errors.FailedPreconditionError, tf.errors.UnknownError, OSError,
                RuntimeError)  # RuntimeError: the summary writer's flush
_REASONS = {'No space left on device': 'free space', 'Disk quota exceeded': 'free space',
            'Read-only file system': 'mount it writable',
            'Permission denied': 'make it writable'}
_TEMPORARY = re.compile(r'\.tempstate\d+$|^\..*\.tmp-[0-9a-f]+$')


def _failed_path(text, reason):
  """The file the message names before '; <reason>' (or ': <reason>'), if any."""
  for line in text.splitlines():
    if reason in line:
      path = re.split(r'[;:] *' + re.escape(reason), line)[0].strip().split(' ')[-1]
      return _TEMPORARY.sub('', path) or None
  return None


def _remove_temporary_files(train_dir):
  removed = 0
  for name in (tf.io.gfile.listdir(train_dir) if tf.io.gfile.isdir(train_dir) else []):
    if _TEMPORARY.search(name):
      try:
        tf.io.gfile.remove(os.path.join(train_dir, name))
        removed += 1
      except (tf.errors.OpError, OSError):
        pass
  return removed


def _chain(error):
  """`error` and the exceptions it was raised while handling, newest first."""
  while error is not None:
    yield error
    error = error.__context__


def _write_reason(error):
  """(message, reason) of a write failure, reason None for any other error."""
  if not isinstance(error, WRITE_ERRORS):
    return '', None
  text = str(error) if not isinstance(error, OSError) else '%s: %s' % (
      error.filename, error.strerror)
  return text, next((r for r in _REASONS if r in text), None)


def describe_write_failure(error, train_dir):
  """One line for a write failure in train_dir (temporary files removed first), or None
  when `error` is not one (an out-of-memory ResourceExhaustedError, say)."""
  failures = [(text, reason) for text, reason in map(_write_reason, _chain(error)) if reason]
  if not failures:
    return None
  # The first failure: closing the summary writer on the way out fails too, later.
  text, reason = failures[-1]
  removed = _remove_temporary_files(train_dir)
  last = paths.latest_checkpoint(train_dir)
  return ('could not write %s (%s); %s%s; %s and run the same command again to %s' % (
      _failed_path(text, reason) or train_dir, reason,
      'the last good checkpoint is %s' % last if last else 'no checkpoint was saved yet',
      ' (%d temporary file%s removed)' % (removed, '' if removed == 1 else 's')
      if removed else '',
      _REASONS[reason], 'resume from it' if last else 'start'))


def quiet_thread_write_errors():
  """A background writer thread (the summary writer's) that dies of a write failure logs
  one line instead of a traceback: the main thread reports the failure. Other thread
  errors keep Python's traceback."""
  default = threading.excepthook

  def hook(args):
    if isinstance(args.exc_value, WRITE_ERRORS) and any(
        reason in str(args.exc_value) for reason in _REASONS):
      logging.warning('%s stopped: %s', getattr(args.thread, 'name', 'a thread'),
                      str(args.exc_value).splitlines()[0])
      return
    default(args)
  threading.excepthook = hook
