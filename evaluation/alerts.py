"""What eval.py warns of, one line each, when its figures may not mean what they seem.

Unsettled batch-norm statistics. Training keeps each batch-norm moving average as
m <- d m + (1 - d) x per update (d: --batch_norm_decay), from mean 0 and variance 1. After
n updates the start still weighs d**n; the warning fires while d**n > e**-5 (0.7 %), that
is while n < 5 / -ln(d), about 5 / (1 - d): 4,998 updates at slim's 0.999, 498 at 0.99.
Updates are the checkpoint's global step x the run's --num_micro_batches. Read from the
run's record (resolve.run_record); no warning without one (nothing says how the run
kept its statistics), for a checkpoint without moving statistics, for a run that froze
them (--freeze_batch_norm) or that recomputed them after its last step
(--precise_bn_batches > 0). Statistics a fine-tune restored (--checkpoint_path, outside
--checkpoint_exclude_scopes, and held by that checkpoint) did not start at 0 / 1: the
line counts only the others, and none is left for a fine-tune that restored them all.

One class takes 90 % or more of a split's predictions (counted: 10 x count >= 9 x N),
as a model whose statistics never settled does: the line gives the class's share of
the labels beside it.
"""

import inspect
import math

from absl import logging

from checkpoints import paths, restore
from core.errors import ConfigError
from nets import nets_factory
from tf_compat import tf

__all__ = ['SETTLED_EXPONENT', 'unsettled_batch_norm', 'restored_statistics', 'dominant_class',
           'warn']

SETTLED_EXPONENT = 5.0   # warn while decay**updates > e**-SETTLED_EXPONENT
_STATISTICS = ('/moving_mean', '/moving_variance')


def _network_decay(model_name):
  """The network's own batch-norm decay (its arg scope's default), or None."""
  parameter = inspect.signature(
      nets_factory.get_network_spec(model_name).arg_scope_fn).parameters.get(
          'batch_norm_decay')
  return None if parameter is None else parameter.default


def _moving_statistics(checkpoint):
  names = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  return sorted(name for name in names if name.endswith(_STATISTICS))


def _held_by(source, model_name):
  """fn(variable name) -> whether checkpoint `source` holds it (directly or through the
  network's map of a foreign checkpoint's names, either modality), or None when `source`
  cannot be read here (a moved checkpoint, a path relative to another directory)."""
  try:
    shapes = restore.checkpoint_shapes(paths.resolve_checkpoint(source))
  except ConfigError:
    return None
  maps = [lambda name: name]
  foreign = nets_factory.get_network_spec(model_name).checkpoint_name_map
  for modality in ('rgb', 'flow') if foreign else ():
    try:
      maps.append(foreign(shapes, modality=modality) or maps[0])
    except ValueError:
      pass
  return lambda name: any(each(name) in shapes for each in maps)


def restored_statistics(record, model_name, statistics):
  """The names among `statistics` (moving means and variances) the run restored from
  its --checkpoint_path when it started, as training.train's fine-tuning plan does: not
  under --checkpoint_exclude_scopes and, with --ignore_missing_vars, held by that
  checkpoint (when it can be read here; the trainer refused to start without one)."""
  source = record.text('checkpoint_path')
  if not source:
    return frozenset()
  scopes = [s for s in (record.text('checkpoint_exclude_scopes') or '').split(',') if s]
  kept = [name for name in statistics
          if not any(restore.in_scope(name, scope) for scope in scopes)]
  held = (_held_by(source, model_name) if record.text('ignore_missing_vars') == 'true'
          else None)
  return frozenset(name for name in kept if held is None or held(name))


def _restored_note(record, statistics, restored):
  if not restored:
    return ''
  started = [name for name in statistics if name not in restored]
  return (' (%d of the %d moving statistics, e.g. %s: the others were restored from '
          '--checkpoint_path=%s)' % (len(started), len(statistics), started[0],
                                     record.text('checkpoint_path')))


def unsettled_batch_norm(record, model_name, checkpoint, global_step):
  """The warning line for a checkpoint whose moving statistics cannot have settled, or
  None (see the module doc). record: the run's RunRecord or None."""
  if record is None or not checkpoint:
    return None
  if record.number('precise_bn_batches', 0) > 0:
    return None
  if (record.text('freeze_batch_norm') or 'none') != 'none':
    return None
  decay = record.number('batch_norm_decay', _network_decay(model_name))
  statistics = _moving_statistics(checkpoint) if decay is not None else ()
  updates = global_step * int(record.number('num_micro_batches', 1))
  needed = SETTLED_EXPONENT / -math.log(decay) if statistics else 0
  if updates >= needed:
    return None
  restored = restored_statistics(record, model_name, statistics)
  if len(restored) == len(statistics):
    return None
  return ('%s (step %d): its batch-norm moving statistics cannot have settled: %d updates '
          'at --batch_norm_decay=%g still weigh their start (mean 0, variance 1) %.0f %%%s; '
          'they need %d (5 / -ln(decay)). Train longer, lower --batch_norm_decay, or '
          'recompute them with --precise_bn_batches' % (
              checkpoint, global_step, updates, decay, 100 * decay ** updates,
              _restored_note(record, statistics, restored), math.ceil(needed)))


def dominant_class(name, metrics, class_names):
  """The warning line when one class takes >= 90 % of `metrics`' predictions, else None.

  metrics: evaluation.metrics.ClassificationMetrics (its confusion matrix counts the
  predictions per class in its columns)."""
  predicted = metrics.confusion.sum(axis=0)
  top = int(predicted.argmax())
  count, total = int(predicted[top]), metrics.num_examples
  if total == 0 or 10 * count < 9 * total:
    return None
  return ('%s: %d of %d predictions (%.1f %%) are class %d %r, which holds %d of the %d '
          'labels: a collapsed model (batch-norm statistics that have not settled?)' % (
              name, count, total, 100.0 * count / total, top, class_names[top],
              int(metrics.class_counts[top]), total))


def warn(evaluated, streams):
  """Logs the warnings of one evaluation.

  Args:
    evaluated: (record, model_name, checkpoint, global_step) per checkpoint evaluated.
    streams: (name, ClassificationMetrics, class names) per stream of figures.
  """
  lines = [unsettled_batch_norm(*each) for each in evaluated]
  lines += [dominant_class(*each) for each in streams]
  for line in lines:
    if line:
      logging.warning('%s', line)
  return [line for line in lines if line]
