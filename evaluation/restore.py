"""Which checkpoint tensor each variable of an inference graph is restored from.

Planned on the built graph, before any session, so that a checkpoint of another model,
class count or modality is refused with one line saying which, instead of a restore
error deep in the session. Moving averages: a variable `v` whose checkpoint also holds
`v/ExponentialMovingAverage` (what tf.train.ExponentialMovingAverage keeps during
training) is restored from that shadow when averages are used.

Variables carry no clone prefix under model_deploy, so the names are the same for a
checkpoint trained with any number of clones or workers.
"""

import dataclasses

from datasets.converted_data import MODALITY_CHANNELS
from tf_compat import tf
from core.params import ConfigError

__all__ = ['EMA_SUFFIX', 'RestoreSpec', 'RestorePlan', 'plan_restore', 'checkpoint_global_step']

EMA_SUFFIX = '/ExponentialMovingAverage'
_CHANNEL_MODALITIES = {channels: name for name, channels in MODALITY_CHANNELS.items()}


@dataclasses.dataclass(frozen=True)
class RestoreSpec:
  """What the model must match, and the flags to blame.

  Attributes:
    checkpoint: checkpoint prefix.
    checkpoint_flag: e.g. 'checkpoint_path' or 'flow_checkpoint_path'.
    model_name: the network, for messages.
    num_classes: logits the model has (from the dataset).
    channels: input channels the model has (from the records).
    data_flag: the flag naming the records, e.g. 'dataset_dir=/data/ucf101_rgb'.
    use_moving_averages: 'auto', 'true' or 'false'.
  """
  checkpoint: str
  checkpoint_flag: str
  model_name: str
  num_classes: int
  channels: int
  data_flag: str
  use_moving_averages: str = 'auto'


@dataclasses.dataclass(frozen=True)
class RestorePlan:
  """var_list for tf.train.Saver ({checkpoint name: variable}) and what it used."""
  var_list: dict
  moving_averages: bool
  global_step: int


def _reader(spec):
  try:
    return tf.train.NewCheckpointReader(spec.checkpoint)
  except (tf.errors.OpError, ValueError) as error:
    raise ConfigError('--%s=%s is not a readable checkpoint: %s' % (
        spec.checkpoint_flag, spec.checkpoint, str(error).split('\n')[0])) from None


def checkpoint_global_step(reader, prefix):
  """The checkpoint's global_step tensor, else the -N of its name, else 0."""
  if reader.has_tensor('global_step'):
    return int(reader.get_tensor('global_step'))
  tail = prefix.rsplit('-', 1)
  return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else 0


def _source_names(spec, variables, shapes):
  """{variable: checkpoint name}, and whether any shadow was used."""
  use = spec.use_moving_averages != 'false'
  names = {v: v.op.name + EMA_SUFFIX if use and v.op.name + EMA_SUFFIX in shapes
           else v.op.name for v in variables}
  averaged = any(name.endswith(EMA_SUFFIX) for name in names.values())
  if spec.use_moving_averages == 'true' and not averaged:
    raise ConfigError('--use_moving_averages=true, but --%s=%s holds no moving averages '
                      '(no %s variables); use auto or false'
                      % (spec.checkpoint_flag, spec.checkpoint, EMA_SUFFIX[1:]))
  return names, averaged


def plan_restore(spec, variables):
  """Plans restoring `variables` (every variable of the inference graph but global_step).

  Raises:
    ConfigError: unreadable checkpoint; a checkpoint of another model, class count,
      modality or width; --use_moving_averages=true without averages.
  """
  reader = _reader(spec)
  shapes = reader.get_variable_to_shape_map()
  names, averaged = _source_names(spec, variables, shapes)
  missing = [v.op.name for v in variables if names[v] not in shapes]
  if missing:
    _refuse_missing(spec, missing, len(variables), shapes)
  mismatched = [(v.op.name, v.shape.as_list(), list(shapes[names[v]])) for v in variables
                if v.shape.as_list() != list(shapes[names[v]])]
  if mismatched:
    _refuse_mismatch(spec, mismatched)
  return RestorePlan({names[v]: v for v in variables}, averaged,
                     checkpoint_global_step(reader, spec.checkpoint))


def _refuse_missing(spec, missing, total, shapes):
  held = sorted(n for n in shapes if n != 'global_step' and not n.endswith(EMA_SUFFIX))
  example = (' (it holds e.g. %s)' % held[0]) if held else ''
  if len(missing) == total:
    raise ConfigError('--%s=%s is not a --model_name=%s checkpoint: none of the model\'s '
                      '%d variables is in it, e.g. %s%s' % (
                          spec.checkpoint_flag, spec.checkpoint, spec.model_name, total,
                          missing[0], example))
  raise ConfigError('--%s=%s lacks %d of the %d variables of --model_name=%s, e.g. %s; '
                    'was it trained with other network options?' % (
                        spec.checkpoint_flag, spec.checkpoint, len(missing), total,
                        spec.model_name, missing[0]))


def _differs_only_in(model_shape, checkpoint_shape, axis):
  return (len(model_shape) == len(checkpoint_shape)
          and all(a == b for i, (a, b) in enumerate(zip(model_shape, checkpoint_shape))
                  if i != axis % len(model_shape)))


def _refuse_mismatch(spec, mismatched):
  name, model_shape, ckpt_shape = mismatched[0]
  where = '--%s=%s' % (spec.checkpoint_flag, spec.checkpoint)
  classes = [m for m in mismatched if m[1][-1] == spec.num_classes
             and _differs_only_in(m[1], m[2], -1)]
  if classes and len(classes) == len(mismatched):
    raise ConfigError('%s was trained for %d classes, but --%s has %d' % (
        where, classes[0][2][-1], spec.data_flag, spec.num_classes))
  if (len(model_shape) >= 4 and model_shape[-2] == spec.channels
      and _differs_only_in(model_shape, ckpt_shape, -2)):
    found = ckpt_shape[-2]
    raise ConfigError('%s takes %d-channel input (%s), but --%s holds %s records (%d '
                      'channels)' % (where, found, _CHANNEL_MODALITIES.get(found, 'other'),
                                     spec.data_flag,
                                     _CHANNEL_MODALITIES.get(spec.channels, 'other'),
                                     spec.channels))
  raise ConfigError('%s does not fit --model_name=%s as configured: %d variable(s) differ in '
                    'shape, e.g. %s is %s in the model and %s in the checkpoint (another '
                    '--depth_multiplier or network?)' % (
                        where, spec.model_name, len(mismatched), name, model_shape,
                        ckpt_shape))
