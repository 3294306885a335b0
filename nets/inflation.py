"""Builds an I3D checkpoint from a 2-D Inception-v1 one ("inflation", the I in I3D).

The work of `python -m nets.inflate`: `InflateConfig` holds its flags,
`inflate_checkpoint(config)` writes the checkpoint and returns an `InflateReport`.

The 2-D checkpoint must carry tf_slim.nets.inception_v1's names
(`InceptionV1/Conv2d_1a_7x7/weights`, `.../BatchNorm/{beta,moving_mean,moving_variance}`,
no gamma), as slim's ImageNet Inception-v1 checkpoint does. Each 2-D kernel k x k becomes
t x k x k, repeated t times along time and divided by t (t = the I3D kernel's temporal
size), so a clip of one image repeated ("boring video") gives the 2-D activations, except
where zero padding in time reached: near the clip ends a temporal kernel sums over fewer
real frames than its taps. That region is wide: at 64 frames it covers every Mixed_5c
position; a clip needs 109 frames for one exact pooled feature. Batch norm betas and
statistics are copied. The 2-D logits (1001 ImageNet classes) are copied
only with --num_classes=1001; otherwise the I3D logits keep their fresh initialisation.
The output is the prefix of a TF checkpoint (.index and .data files, no meta graph) with
our I3D names, restorable directly by the training code. Writing goes to a temporary
prefix renamed at the end, so a failure leaves no half-written checkpoint.
"""

import dataclasses
import glob
import os
from typing import Optional

import numpy as np

from tf_compat import tf, slim
from nets import i3d
from checkpoints.paths import resolve_checkpoint
from core.params import ConfigError, param

__all__ = ['InflateConfig', 'InflateReport', 'inflate_kernel', 'source_name',
           'inflate_checkpoint', 'summary_line']

# Our I3D unit names that tf_slim's 2-D net spells differently (beyond Conv3d/Conv2d).
_RENAMED_UNITS = {'Mixed_5b/Branch_2/Conv3d_0b_3x3': 'Mixed_5b/Branch_2/Conv2d_0a_3x3'}
_LOGITS_SCOPE = 'InceptionV1/Logits/'
# Inflation only assigns arrays and writes them, which the CPU does as fast: its session
# makes no GPU device, so it maps no GPU memory (a GPU session takes all free memory of
# every visible GPU) and needs neither GPU memory flags nor deployment's session config.
_CPU_ONLY = dict(device_count={'GPU': 0})


@dataclasses.dataclass(frozen=True)
class InflateConfig:
  """What to inflate; checked in __post_init__ (ConfigError naming the flag)."""
  # Checkpoints.
  checkpoint_2d: Optional[str] = param(
      None, '2-D Inception-v1 checkpoint with tf_slim names: a prefix, one of its '
      'files, or a directory (its latest).')
  output: Optional[str] = param(
      None, 'Prefix of the I3D checkpoint to write, e.g. DIR/i3d_inflated.ckpt (its '
      'directory is created).')
  # Network.
  num_classes: int = param(400, 'I3D logits; 1001 copies the 2-D ImageNet logits, any '
                           'other count leaves them initialised, 0 builds none.')
  depth_multiplier: float = param(1.0, 'I3D width multiplier; must match the widths '
                                  'of the 2-D checkpoint.')

  def __post_init__(self):
    for flag in ('checkpoint_2d', 'output'):
      if not getattr(self, flag):
        raise ConfigError(f'--{flag} is required')
    if isinstance(self.num_classes, bool) or not (
        isinstance(self.num_classes, int) and self.num_classes >= 0):
      raise ConfigError(f'--num_classes={self.num_classes}: must be an integer >= 0')
    if not self.depth_multiplier > 0:
      raise ConfigError(f'--depth_multiplier={self.depth_multiplier}: must be > 0')


@dataclasses.dataclass(frozen=True)
class InflateReport:
  """output: the checkpoint prefix written; inflated / copied: I3D variable names
  filled from the 2-D checkpoint (kernels / everything else); initialised: names left
  at their fresh initial value (the logits when their shape does not fit)."""
  output: str
  inflated: tuple
  copied: tuple
  initialised: tuple


def inflate_kernel(kernel_2d, time_size):
  """[kh, kw, in, out] -> [time_size, kh, kw, in, out]: repeated, divided by time_size.

  Summing the result over time gives kernel_2d back, so on a clip constant in time
  (away from its ends) the 3-D convolution equals the 2-D one.
  """
  kernel_2d = np.asarray(kernel_2d)
  return np.repeat(kernel_2d[np.newaxis], time_size, axis=0) / np.float32(time_size)


def source_name(variable_name):
  """The 2-D Inception-v1 name of an I3D variable name.

  'InceptionV1/Mixed_3b/Branch_1/Conv3d_0b_3x3/weights' ->
  'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/weights';
  Mixed_5b/Branch_2's Conv3d_0b_3x3 -> tf_slim's Conv2d_0a_3x3.
  """
  for ours, theirs in _RENAMED_UNITS.items():
    variable_name = variable_name.replace('/' + ours + '/', '/' + theirs + '/')
  return variable_name.replace('/Conv3d_', '/Conv2d_')


def _read_checkpoint(config):
  """(reader, name -> shape) of the 2-D checkpoint, checked to be an Inception-v1."""
  prefix = resolve_checkpoint(config.checkpoint_2d, flag='checkpoint_2d')
  try:
    reader = tf.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, ValueError) as error:
    raise ConfigError(f'--checkpoint_2d={config.checkpoint_2d}: cannot read it as a '
                      f'checkpoint ({str(error).splitlines()[0]})') from None
  shapes = reader.get_variable_to_shape_map()
  first = 'InceptionV1/Conv2d_1a_7x7/weights'
  if first not in shapes:
    shown = ', '.join(sorted(shapes)[:3]) or 'no variables'
    raise ConfigError(f'--checkpoint_2d={config.checkpoint_2d} is not a 2-D Inception-v1 '
                      f'checkpoint with tf_slim names: no {first} (found {shown}, ...)')
  gammas = sorted(name for name in shapes if name.endswith('/BatchNorm/gamma'))
  if gammas:
    raise ConfigError(f'--checkpoint_2d={config.checkpoint_2d} has batch norm scales '
                      f'({gammas[0]}, ...); I3D\'s batch norm has none (expected tf_slim '
                      'inception_v1, whose batch norm has no gamma)')
  return reader, shapes


def _build_i3d(config):
  """The I3D variables, built in the current graph; input size does not matter."""
  clips = tf.placeholder(tf.float32, [None, 64, i3d.i3d.default_image_size,
                                      i3d.i3d.default_image_size, 3])
  with slim.arg_scope(i3d.i3d_arg_scope()):
    i3d.i3d(clips, num_classes=config.num_classes, is_training=False,
            depth_multiplier=config.depth_multiplier)
  return tf.global_variables()


def _inflated_value(variable, shapes, reader):
  """The value for `variable` from the 2-D checkpoint, or None when it has no fit."""
  name = source_name(variable.op.name)
  shape = variable.shape.as_list()
  if name not in shapes:
    return None
  source_shape = list(shapes[name])
  if len(shape) == 5 and source_shape == shape[1:]:
    return inflate_kernel(reader.get_tensor(name), shape[0])
  if source_shape == shape:
    return reader.get_tensor(name)
  return None


def _values_for(variables, shapes, reader, config):
  """variable -> value for every I3D variable; only the logits may go without."""
  values = {}
  for variable in variables:
    value = _inflated_value(variable, shapes, reader)
    if value is not None:
      values[variable] = value
    elif not variable.op.name.startswith(_LOGITS_SCOPE):
      name = source_name(variable.op.name)
      found = list(shapes[name]) if name in shapes else 'missing'
      raise ConfigError(
          f'--checkpoint_2d={config.checkpoint_2d}: {name} is {found}, I3D\'s '
          f'{variable.op.name} is {variable.shape.as_list()} at --depth_multiplier='
          f'{config.depth_multiplier}; is it tf_slim\'s Inception-v1 at that width?')
  return values


def _check_output_is_free(config):
  """ConfigError unless config.output names a new checkpoint prefix."""
  if os.path.isdir(config.output):
    raise ConfigError(f'--output={config.output} is a directory; give a checkpoint '
                      'prefix such as DIR/i3d_inflated.ckpt')
  existing = glob.glob(glob.escape(config.output) + '.index') + glob.glob(
      glob.escape(config.output) + '.data-*')
  if existing:
    raise ConfigError(f'--output={config.output} already holds a checkpoint '
                      f'({existing[0]}); choose a new prefix or remove it')


def _assign(session, values):
  """Assigns every value in one run (a `Variable.load` per variable is slow)."""
  holders = {v: tf.placeholder(v.dtype.base_dtype, v.shape) for v in values}
  session.run([tf.assign(v, holders[v]) for v in values],
              {holders[v]: value for v, value in values.items()})


def _save_atomically(session, output):
  """Saves every global variable as `output`, written under a temporary prefix first.

  On any failure nothing is left: neither temporary files nor part of `output`
  (which _check_output_is_free made sure did not exist).
  """
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  temporary = f'{output}.tmp-{os.getpid()}'
  saver = tf.train.Saver(tf.global_variables(), write_version=tf.train.SaverDef.V2)
  moved = []
  try:
    saver.save(session, temporary, write_meta_graph=False, write_state=False)
    written = glob.glob(glob.escape(temporary) + '.*')
    # The index last: whoever finds it finds complete data files.
    for path in sorted(written, key=lambda p: p.endswith('.index')):
      os.replace(path, output + path[len(temporary):])
      moved.append(output + path[len(temporary):])
  except BaseException:
    for path in moved:
      os.remove(path)
    raise
  finally:
    for path in glob.glob(glob.escape(temporary) + '.*'):
      os.remove(path)


def inflate_checkpoint(config):
  """Writes the I3D checkpoint `config.output` inflated from `config.checkpoint_2d`.

  Returns:
    An InflateReport.

  Raises:
    ConfigError: the 2-D checkpoint is missing, unreadable, not a tf_slim
      Inception-v1 or of another width than config.depth_multiplier; or the output
      prefix already holds a checkpoint.
    OSError, tf.errors.OpError: the output could not be written.
  """
  reader, shapes = _read_checkpoint(config)
  _check_output_is_free(config)
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    variables = _build_i3d(config)
    values = _values_for(variables, shapes, reader, config)
    with tf.Session(config=tf.ConfigProto(**_CPU_ONLY)) as session:
      session.run(tf.global_variables_initializer())
      _assign(session, values)
      _save_atomically(session, config.output)
  inflated = tuple(v.op.name for v in values if len(v.shape) == 5)
  copied = tuple(v.op.name for v in values if len(v.shape) != 5)
  initialised = tuple(v.op.name for v in variables if v not in values)
  return InflateReport(config.output, inflated, copied, initialised)


def summary_line(report):
  """One line saying what inflate_checkpoint wrote (its InflateReport)."""
  line = (f'wrote {report.output}: {len(report.inflated)} kernels inflated, '
          f'{len(report.copied)} other variables copied')
  if report.initialised:
    line += '; left initialised (no 2-D counterpart of that shape): ' + ', '.join(
        report.initialised)
  return line
