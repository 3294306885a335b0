"""Fine-tuning restore: which variables come from a checkpoint, checked before training.

The plan is made on the built graph, before any session: every model variable is either
excluded (by scope), restored (present with the same shape), missing from the checkpoint,
or shape-mismatched. A mismatch that is not excluded is an error naming the variables and
the flag that fixes it (slim failed deep inside the session with "Assign requires shapes
of both tensors to match"); a missing variable is an error unless ignore_missing_vars.
Scope flags that match no variable are errors too: a typo in an exclude scope otherwise
silently restores the very layer it meant to drop.
"""

import collections
import os
import re

import numpy as np

from absl import logging

from tf_compat import tf, slim
from core.params import ConfigError

__all__ = ['RestorePlan', 'resolve_checkpoint', 'filter_by_scopes', 'plan_restore',
           'make_init_fn', 'log_restore_report', 'checkpoint_shapes', 'same_values_shape']

RestorePlan = collections.namedtuple(
    'RestorePlan', ['checkpoint_file', 'restored', 'missing', 'mismatched', 'excluded'])
RestorePlan.__doc__ = """restored: [(checkpoint name, variable)]; missing: [variable name];
mismatched: [(variable name, model shape, checkpoint shape)]; excluded: [variable name]."""


_CHECKPOINT_FILE_SUFFIX = re.compile(r'\.(index|meta|data-\d{5}-of-\d{5})$')


def resolve_checkpoint(path, flag='checkpoint_path'):
  """A checkpoint prefix for a prefix, one of its files, or a directory (its latest)."""
  if tf.gfile.IsDirectory(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise ConfigError('--%s=%s: the directory holds no checkpoint (expected a '
                        '"checkpoint" file from a training run)' % (flag, path))
    return latest
  prefix = _CHECKPOINT_FILE_SUFFIX.sub('', path)
  if tf.gfile.Exists(prefix + '.index'):
    return prefix
  if tf.gfile.Exists(path) and prefix == path:
    return path  # A TF1 V1 checkpoint is a single file.
  raise ConfigError('--%s=%s: no such checkpoint (give a checkpoint prefix such as '
                    'model.ckpt-1000, or a directory holding checkpoints)' % (flag, path))


def in_scope(name, scope):
  scope = scope.rstrip('/')
  return name == scope or name.startswith(scope + '/')


def filter_by_scopes(variables, scopes, flag):
  """Variables under any of `scopes`; a scope matching nothing is a ConfigError."""
  selected = []
  for scope in scopes:
    matched = [v for v in variables if in_scope(v.op.name, scope)]
    if not matched:
      roots = sorted({v.op.name.split('/')[0] + '/' + v.op.name.split('/')[1]
                      if '/' in v.op.name else v.op.name for v in variables})
      raise ConfigError('--%s: scope %r matches no model variable; scopes in this model '
                        'include %s' % (flag, scope, ', '.join(roots[:12])))
    selected.extend(v for v in matched if v not in selected)
  return selected


def plan_restore(checkpoint_file, variables, exclude_scopes=(), ignore_missing_vars=False,
                 name_map=None):
  """Decides, per variable, what restoring `checkpoint_file` does.

  Args:
    checkpoint_file: a checkpoint prefix.
    variables: the model variables to consider (slim.get_model_variables()).
    exclude_scopes: variables under these scopes are not restored.
    ignore_missing_vars: tolerate variables the checkpoint lacks.
    name_map: optional fn(variable op name) -> checkpoint name (for foreign checkpoints).

  Raises:
    ConfigError on an unexcluded shape mismatch, on missing variables without
    ignore_missing_vars, or when nothing would be restored.
  """
  excluded = filter_by_scopes(variables, exclude_scopes, 'checkpoint_exclude_scopes')
  shapes = checkpoint_shapes(checkpoint_file)
  restored, missing, mismatched = [], [], []
  for var in variables:
    if var in excluded:
      continue
    ckpt_name = name_map(var.op.name) if name_map else var.op.name
    model_shape = var.get_shape().as_list()
    if ckpt_name not in shapes:
      missing.append(var.op.name)
    elif not same_values_shape(shapes[ckpt_name], model_shape):
      mismatched.append((var.op.name, model_shape, list(shapes[ckpt_name])))
    else:
      restored.append((ckpt_name, var))
  plan = RestorePlan(checkpoint_file, restored, missing, mismatched,
                     [v.op.name for v in excluded])
  _check_plan(plan, ignore_missing_vars)
  return plan


def same_values_shape(checkpoint_shape, model_shape):
  """Equal shapes, or equal after dropping size-1 dimensions (restored with a reshape).

  Sonnet (DeepMind's I3D) keeps batch-norm vectors as [1, 1, 1, 1, C] where slim keeps
  [C]: the same values.
  """
  if list(checkpoint_shape) == list(model_shape):
    return True
  return ([d for d in checkpoint_shape if d != 1] == [d for d in model_shape if d != 1]
          and int(np.prod(checkpoint_shape)) == int(np.prod(model_shape)))


def checkpoint_shapes(checkpoint_file):
  """checkpoint variable name -> shape (list), read from the index only."""
  return tf.train.NewCheckpointReader(checkpoint_file).get_variable_to_shape_map()


def _check_plan(plan, ignore_missing_vars):
  if plan.mismatched:
    name, model_shape, ckpt_shape = plan.mismatched[0]
    raise ConfigError(
        '--checkpoint_path=%s: %d variable(s) differ in shape from the checkpoint, e.g. %s '
        'is %s in the model and %s in the checkpoint; add their scope to '
        '--checkpoint_exclude_scopes (e.g. %s)' % (
            plan.checkpoint_file, len(plan.mismatched), name, model_shape, ckpt_shape,
            name.rsplit('/', 1)[0]))
  if plan.missing and not ignore_missing_vars:
    raise ConfigError(
        '--checkpoint_path=%s: %d model variable(s) are not in the checkpoint, e.g. %s; '
        'exclude their scope or pass --ignore_missing_vars' % (
            plan.checkpoint_file, len(plan.missing), plan.missing[0]))
  if not plan.restored:
    raise ConfigError('--checkpoint_path=%s: no model variable would be restored from '
                      'it (wrong model or wrong checkpoint?)' % plan.checkpoint_file)


def log_restore_report(plan):
  logging.info('Fine-tuning from %s: %d variables restored, %d excluded, %d missing, '
               '%d shape-mismatched', plan.checkpoint_file, len(plan.restored),
               len(plan.excluded), len(plan.missing), len(plan.mismatched))
  for name in plan.excluded:
    logging.info('  excluded: %s', name)
  for name in plan.missing:
    logging.warning('  missing from checkpoint (left at its initial value): %s', name)
  for ckpt_name, var in plan.restored:
    logging.debug('  restored: %s <- %s', var.op.name, ckpt_name)


def make_init_fn(plan):
  """fn(session) restoring the plan's variables; the Saver is built now, pre-finalize."""
  # reshape=True only restores values of the same size into another shape ([1,1,1,1,C]
  # into [C]); plan_restore already refused every real shape difference.
  saver = tf.train.Saver({name: var for name, var in plan.restored}, reshape=True,
                         name='fine_tune_saver')

  def init_fn(session):
    saver.restore(session, plan.checkpoint_file)
  return init_fn


def model_variables():
  return slim.get_model_variables()


def train_dir_checkpoint(train_dir):
  """The latest checkpoint in train_dir, or None (a resume skips fine-tune restore)."""
  if train_dir and os.path.isdir(train_dir):
    return tf.train.latest_checkpoint(train_dir)
  return None
