"""A loss that is no longer a number ends training with one line, not two tracebacks.

The step notices first (training.progress: the loss it fetched is NaN or infinite, where
no float16 loss scale is there to skip the step), or a histogram summary of NaN weights
does (TensorBoard's "Nan in summary histogram"). Either way the run stops without a
final save, and the line names the global step and the newest checkpoint of train_dir
whose weights are all finite: an update can make the weights NaN a step before the loss
shows it, so the checkpoints are read, newest first. Exit status 7 (docs/exit-status.md).
"""

import contextlib
import math

import numpy as np

from checkpoints import paths
from core.errors import TrainingDiverged
from tf_compat import tf

__all__ = ['NonFiniteLoss', 'check_loss', 'naming_divergence', 'last_finite_checkpoint']

_SUMMARY_NAN = ('Nan in summary histogram', 'Inf in summary histogram')


class NonFiniteLoss(Exception):
  """Raised by the step: the loss of global step `step` is `loss` (NaN or infinite)."""

  def __init__(self, step, loss):
    super().__init__('the loss of global step %d is %s' % (step, loss))
    self.step, self.loss = step, loss


def check_loss(step, loss, loss_scaled):
  """Raises NonFiniteLoss unless `loss` is finite; a loss-scaled (float16) step whose
  gradients overflowed is skipped by the loss scale instead."""
  if not loss_scaled and not math.isfinite(loss):
    raise NonFiniteLoss(step, loss)


def last_finite_checkpoint(train_dir):
  """The newest checkpoint of train_dir whose floating entries are all finite, or None."""
  for path in reversed(paths.listed_checkpoints(train_dir)):
    if not paths.is_complete(path):
      continue
    reader = tf.train.load_checkpoint(path)
    if all(np.all(np.isfinite(reader.get_tensor(name)))
           for name, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating):
      return path
  return None


@contextlib.contextmanager
def naming_divergence(train_dir):
  """Turns a NonFiniteLoss, or a summary's NaN error, into one TrainingDiverged line."""
  try:
    yield
  except NonFiniteLoss as error:
    raise TrainingDiverged(_line(str(error), train_dir)) from None
  except tf.errors.InvalidArgumentError as error:
    message = str(getattr(error, 'message', error)).splitlines()[0]
    if not message.startswith(_SUMMARY_NAN):
      raise
    raise TrainingDiverged(_line('a summary met NaN or infinite values (%s)' % message,
                                 train_dir)) from None


def _line(what, train_dir):
  last = last_finite_checkpoint(train_dir) if train_dir else None
  return ('training diverged: %s; %s; lower --learning_rate or add --clip_gradient_norm, '
          'and resume from a finite checkpoint (delete the later ones)' % (
              what, 'the last checkpoint with finite weights is %s' % last if last
              else 'no checkpoint of %s has finite weights' % train_dir))
