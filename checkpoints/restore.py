"""What restoring a checkpoint into a built graph does, decided before any session.

One plan for both uses: every variable is either excluded (by scope), restored (from a
checkpoint tensor of the same shape, or of the same values in another shape: Sonnet keeps
batch-norm vectors as [1, 1, 1, 1, C] where slim keeps [C]), missing from the checkpoint,
or shape-mismatched. Then each use judges the plan by its own rule, in one line naming the
flag that fixes it, instead of a restore error deep in the session:

  * fine-tuning (`plan_fine_tuning`): a mismatch that is not excluded is an error (slim
    failed with "Assign requires shapes of both tensors to match"), a missing variable is
    one unless ignore_missing_vars, and a scope that matches no variable is one too (a
    typo otherwise silently restores the very layer it meant to drop);
  * inference (`plan_inference`: eval, export): every variable must come from the
    checkpoint; a checkpoint of another model, class count or modality is named as such.
    `restore_inference` plans and restores in one call, the one restore of eval's loop
    (`evaluation.loop`) and of the export (`serving.export_model`).

Moving averages: a variable `v` whose checkpoint also holds `v/ExponentialMovingAverage`
(what tf.train.ExponentialMovingAverage keeps during training) is restored from that
shadow when averages are asked for. Variables carry no clone prefix under model_deploy,
so the names are the same for a checkpoint trained with any number of clones or workers.
Foreign checkpoints are read through a `name_map` (variable name -> checkpoint name) the
caller takes from `nets` (DeepMind's I3D).
"""

import dataclasses

import numpy as np
from absl import logging

from checkpoints.paths import global_step_of
from core.params import ConfigError
from tf_compat import tf

__all__ = ['EMA_SUFFIX', 'MOVING_AVERAGE_MODES', 'RestorePlan', 'ModelFit',
           'plan_restore', 'plan_fine_tuning', 'plan_inference', 'restore_inference',
           'filter_by_scopes',
           'log_restore_report', 'make_saver', 'make_init_fn', 'checkpoint_shapes',
           'same_values_shape']

EMA_SUFFIX = '/ExponentialMovingAverage'
MOVING_AVERAGE_MODES = ('auto', 'true', 'false')
# datasets.formats.converted_data.MODALITY_CHANNELS inverted, plus grey images; written out here
# because checkpoints/ sits below datasets/.
_CHANNEL_MODALITIES = {3: 'rgb', 2: 'flow', 1: 'grey'}


@dataclasses.dataclass(frozen=True)
class RestorePlan:
  """What restoring `checkpoint_file` does.

  Attributes:
    checkpoint_file: the checkpoint prefix.
    flag: the flag that named it, for messages (e.g. 'flow_checkpoint_path').
    restored: ((checkpoint name, variable), ...).
    missing: names of variables the checkpoint lacks.
    mismatched: ((variable name, model shape, checkpoint shape), ...).
    excluded: names of variables left out by scope.
    moving_averages: whether any variable comes from its moving-average shadow.
    global_step: the checkpoint's global step (its tensor, else its name's -N, else 0).
  """
  checkpoint_file: str
  flag: str
  restored: tuple
  missing: tuple
  mismatched: tuple
  excluded: tuple
  moving_averages: bool
  global_step: int

  @property
  def var_list(self):
    """{checkpoint name: variable}, as tf.train.Saver takes it."""
    return dict(self.restored)


@dataclasses.dataclass(frozen=True)
class ModelFit:
  """What an inference model must match, and the flags to blame.

  Attributes:
    model_name: the network, for messages.
    num_classes: logits the model has.
    channels: input channels the model has (from the records).
    data_flag: the flag naming the records, e.g. 'dataset_dir=/data/ucf101_rgb'.
  """
  model_name: str
  num_classes: int
  channels: int
  data_flag: str


def checkpoint_shapes(checkpoint_file, flag='checkpoint_path'):
  """checkpoint variable name -> shape (list), read from the index only."""
  return _reader(checkpoint_file, flag).get_variable_to_shape_map()


def _reader(checkpoint_file, flag):
  try:
    return tf.train.NewCheckpointReader(checkpoint_file)
  except (tf.errors.OpError, ValueError) as error:
    raise ConfigError('--%s=%s is not a readable checkpoint: %s' % (
        flag, checkpoint_file, str(error).split('\n')[0])) from None


def same_values_shape(checkpoint_shape, model_shape):
  """Equal shapes, or equal after dropping size-1 dimensions (restored with a reshape)."""
  if list(checkpoint_shape) == list(model_shape):
    return True
  return ([d for d in checkpoint_shape if d != 1] == [d for d in model_shape if d != 1]
          and int(np.prod(checkpoint_shape)) == int(np.prod(model_shape)))


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


def _source_name(name, shapes, averages):
  if averages != 'false' and name + EMA_SUFFIX in shapes:
    return name + EMA_SUFFIX
  return name


def plan_restore(checkpoint_file, variables, exclude_scopes=(), name_map=None,
                 moving_averages='false', flag='checkpoint_path'):
  """Decides, per variable, what restoring `checkpoint_file` does; judges nothing but
  the checkpoint's readability and the exclude scopes (see the module doc).

  Args:
    checkpoint_file: a checkpoint prefix.
    variables: the variables to consider.
    exclude_scopes: variables under these scopes are not restored.
    name_map: optional fn(variable op name) -> checkpoint name (foreign checkpoints).
    moving_averages: 'auto' (shadows where the checkpoint holds them), 'true' (the
      same, and an error if it holds none) or 'false'.
    flag: the flag that named the checkpoint, for messages.
  """
  reader = _reader(checkpoint_file, flag)
  shapes = reader.get_variable_to_shape_map()
  excluded = filter_by_scopes(variables, exclude_scopes, 'checkpoint_exclude_scopes')
  restored, missing, mismatched = [], [], []
  for var in variables:
    if var in excluded:
      continue
    name = _source_name(name_map(var.op.name) if name_map else var.op.name, shapes,
                        moving_averages)
    model_shape = var.get_shape().as_list()
    if name not in shapes:
      missing.append(var.op.name)
    elif not same_values_shape(shapes[name], model_shape):
      mismatched.append((var.op.name, model_shape, list(shapes[name])))
    else:
      restored.append((name, var))
  averaged = any(name.endswith(EMA_SUFFIX) for name, _ in restored)
  if moving_averages == 'true' and not averaged:
    raise ConfigError('--use_moving_averages=true, but --%s=%s holds no moving averages '
                      '(no %s variables); use auto or false'
                      % (flag, checkpoint_file, EMA_SUFFIX[1:]))
  return RestorePlan(checkpoint_file, flag, tuple(restored), tuple(missing),
                     tuple(mismatched), tuple(v.op.name for v in excluded), averaged,
                     global_step_of(reader, checkpoint_file))


def plan_fine_tuning(checkpoint_file, variables, exclude_scopes=(),
                     ignore_missing_vars=False, name_map=None):
  """The plan for starting training from `checkpoint_file` (module doc).

  Raises:
    ConfigError on an unexcluded shape mismatch, on missing variables without
    ignore_missing_vars, or when nothing would be restored.
  """
  plan = plan_restore(checkpoint_file, variables, exclude_scopes, name_map)
  where = '--%s=%s' % (plan.flag, checkpoint_file)
  if plan.mismatched:
    name, model_shape, ckpt_shape = plan.mismatched[0]
    raise ConfigError(
        '%s: %d variable(s) differ in shape from the checkpoint, e.g. %s is %s in the '
        'model and %s in the checkpoint; add their scope to --checkpoint_exclude_scopes '
        '(e.g. %s)' % (where, len(plan.mismatched), name, model_shape, ckpt_shape,
                       name.rsplit('/', 1)[0]))
  if plan.missing and not ignore_missing_vars:
    raise ConfigError('%s: %d model variable(s) are not in the checkpoint, e.g. %s; '
                      'exclude their scope or pass --ignore_missing_vars'
                      % (where, len(plan.missing), plan.missing[0]))
  if not plan.restored:
    raise ConfigError('%s: no model variable would be restored from it (wrong model or '
                      'wrong checkpoint?)' % where)
  return plan


def plan_inference(checkpoint_file, variables, fit, moving_averages='auto',
                   flag='checkpoint_path'):
  """The plan for evaluating or exporting `checkpoint_file`: every one of `variables`
  (the inference graph's, global_step excepted) comes from it.

  Raises:
    ConfigError: unreadable checkpoint; a checkpoint of another model, class count,
      modality or width; moving_averages='true' without averages.
  """
  plan = plan_restore(checkpoint_file, variables, moving_averages=moving_averages,
                      flag=flag)
  if plan.missing:
    _refuse_missing(plan, fit, len(variables))
  if plan.mismatched:
    _refuse_mismatch(plan, fit)
  return plan


def restore_inference(sess, checkpoint_file, fit, moving_averages='auto',
                      flag='checkpoint_path'):
  """Restores every variable of `sess`'s graph from `checkpoint_file` as `plan_inference`
  plans it; returns the RestorePlan.

  Raises:
    ConfigError: what plan_inference refuses, or a checkpoint that could not be read
      after all (a trainer's Saver keeps only its newest: the files went away since).
  """
  plan = plan_inference(checkpoint_file, sess.graph.get_collection(
      tf.GraphKeys.GLOBAL_VARIABLES), fit, moving_averages, flag)
  with sess.graph.as_default():
    saver = make_saver(plan)
  try:
    saver.restore(sess, checkpoint_file)
  except (tf.errors.NotFoundError, tf.errors.DataLossError, tf.errors.OutOfRangeError,
          ValueError) as error:
    # The plan checked names and shapes: the files went away or are damaged (a data file
    # cut short reads out of range).
    raise ConfigError('--%s=%s could not be read: %s' % (
        flag, checkpoint_file, str(error).split('\n')[0])) from None
  return plan


def _refuse_missing(plan, fit, total):
  shapes = checkpoint_shapes(plan.checkpoint_file, plan.flag)
  held = sorted(n for n in shapes if n != 'global_step' and not n.endswith(EMA_SUFFIX))
  example = (' (it holds e.g. %s)' % held[0]) if held else ''
  where = '--%s=%s' % (plan.flag, plan.checkpoint_file)
  if len(plan.missing) == total:
    raise ConfigError('%s is not a --model_name=%s checkpoint: none of the model\'s %d '
                      'variables is in it, e.g. %s%s' % (
                          where, fit.model_name, total, plan.missing[0], example))
  raise ConfigError('%s lacks %d of the %d variables of --model_name=%s, e.g. %s; was it '
                    'trained with other network options?' % (
                        where, len(plan.missing), total, fit.model_name, plan.missing[0]))


def _differs_only_in(model_shape, checkpoint_shape, axis):
  return (len(model_shape) == len(checkpoint_shape)
          and all(a == b for i, (a, b) in enumerate(zip(model_shape, checkpoint_shape))
                  if i != axis % len(model_shape)))


def _refuse_mismatch(plan, fit):
  name, model_shape, ckpt_shape = plan.mismatched[0]
  where = '--%s=%s' % (plan.flag, plan.checkpoint_file)
  classes = [m for m in plan.mismatched if m[1][-1] == fit.num_classes
             and _differs_only_in(m[1], m[2], -1)]
  if classes and len(classes) == len(plan.mismatched):
    raise ConfigError('%s was trained for %d classes, but --%s has %d' % (
        where, classes[0][2][-1], fit.data_flag, fit.num_classes))
  if (len(model_shape) >= 4 and model_shape[-2] == fit.channels
      and _differs_only_in(model_shape, ckpt_shape, -2)):
    found = ckpt_shape[-2]
    raise ConfigError('%s takes %d-channel input (%s), but --%s holds %s records (%d '
                      'channels)' % (where, found, _CHANNEL_MODALITIES.get(found, 'other'),
                                     fit.data_flag,
                                     _CHANNEL_MODALITIES.get(fit.channels, 'other'),
                                     fit.channels))
  raise ConfigError('%s does not fit --model_name=%s as configured: %d variable(s) differ in '
                    'shape, e.g. %s is %s in the model and %s in the checkpoint (another '
                    '--depth_multiplier or network?)' % (
                        where, fit.model_name, len(plan.mismatched), name, model_shape,
                        ckpt_shape))


def log_restore_report(plan, purpose='Fine-tuning'):
  logging.info('%s from %s (step %d): %d variables restored%s, %d excluded, %d missing, '
               '%d shape-mismatched', purpose, plan.checkpoint_file, plan.global_step,
               len(plan.restored), ' (moving averages)' if plan.moving_averages else '',
               len(plan.excluded), len(plan.missing), len(plan.mismatched))
  for name in plan.excluded:
    logging.info('  excluded: %s', name)
  for name in plan.missing:
    logging.warning('  missing from checkpoint (left at its initial value): %s', name)
  for ckpt_name, var in plan.restored:
    logging.debug('  restored: %s <- %s', var.op.name, ckpt_name)


def make_saver(plan, name='restore_saver'):
  """A tf.train.Saver restoring the plan's variables; built now, before finalize."""
  # reshape=True only restores values of the same size into another shape ([1,1,1,1,C]
  # into [C]); the plan already set every real shape difference apart.
  return tf.train.Saver(plan.var_list, reshape=True, name=name)


def make_init_fn(plan):
  """fn(session) restoring the plan's variables (slim's init_fn)."""
  saver = make_saver(plan, name='fine_tune_saver')

  def init_fn(session):
    saver.restore(session, plan.checkpoint_file)
  return init_fn
