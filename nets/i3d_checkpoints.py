"""Name maps between our slim I3D variables (nets/i3d.py) and foreign I3D checkpoints.

Pure name logic: no graph, no session. The training code asks

    shapes = tf.train.NewCheckpointReader(path).get_variable_to_shape_map()
    name_map = name_map_for_checkpoint(shapes, model_scope='InceptionV1', modality='rgb')

and passes `name_map` (None or fn(variable op name) -> checkpoint name) on to
`checkpoints.restore.plan_fine_tuning`.

Checkpoint namings understood:

* slim (ours, and inflated ones from nets/inflation.py): `InceptionV1/Conv3d_1a_7x7/weights`,
  `.../BatchNorm/beta`; used as is (name_map None).
* DeepMind kinetics-i3d (Sonnet): `RGB/inception_i3d/...` (rgb_scratch, rgb_imagenet),
  `Flow/inception_i3d/...` (flow_scratch, flow_imagenet), and rgb_scratch_kin600's
  unprefixed `inception_i3d/...`, which also holds Momentum slots
  (`.../conv_3d/w/Momentum`) that nothing maps to. Per unit:

      ours                              DeepMind
      <unit>/weights                    <unit>/conv_3d/w
      <unit>/biases (logits only)       <unit>/conv_3d/b
      <unit>/BatchNorm/beta             <unit>/batch_norm/beta
      <unit>/BatchNorm/moving_mean      <unit>/batch_norm/moving_mean
      <unit>/BatchNorm/moving_variance  <unit>/batch_norm/moving_variance
      Mixed_5b/Branch_2/Conv3d_0b_3x3   Mixed_5b/Branch_2/Conv3d_0a_3x3 (their name)

  Sonnet's BatchNorm keeps beta and the moving statistics as [1, 1, 1, 1, C] where slim
  keeps [C]: same values, so restoring them needs a Saver with reshape=True and a shape
  check that ignores size-1 dimensions.
"""

import collections

__all__ = ['MODALITIES', 'CheckpointNaming', 'slim_to_deepmind_name',
           'deepmind_to_slim_name', 'checkpoint_naming', 'name_map_for_checkpoint']

# Input channels of the first kernel per modality.
MODALITIES = {'rgb': 3, 'flow': 2}

FIRST_UNIT = 'Conv3d_1a_7x7'

# DeepMind's scope per modality; rgb_scratch_kin600 has no stream prefix.
_DEEPMIND_SCOPES = {'RGB/inception_i3d': 'rgb', 'Flow/inception_i3d': 'flow',
                    'inception_i3d': None}

# Variable name endings: ours -> DeepMind's.
_LEAF_TO_DEEPMIND = {
    'weights': 'conv_3d/w',
    'biases': 'conv_3d/b',
    'BatchNorm/beta': 'batch_norm/beta',
    'BatchNorm/moving_mean': 'batch_norm/moving_mean',
    'BatchNorm/moving_variance': 'batch_norm/moving_variance',
}
_LEAF_FROM_DEEPMIND = {theirs: ours for ours, theirs in _LEAF_TO_DEEPMIND.items()}

# Units whose name we made regular; DeepMind (like tf_slim's 2-D net) kept the old one.
_UNIT_TO_DEEPMIND = {'Mixed_5b/Branch_2/Conv3d_0b_3x3': 'Mixed_5b/Branch_2/Conv3d_0a_3x3'}
_UNIT_FROM_DEEPMIND = {theirs: ours for ours, theirs in _UNIT_TO_DEEPMIND.items()}

CheckpointNaming = collections.namedtuple('CheckpointNaming',
                                          ['naming', 'scope', 'modality'])
CheckpointNaming.__doc__ = """naming: 'slim' or 'deepmind'; scope: the checkpoint's
top scope ('InceptionV1', 'RGB/inception_i3d', ...); modality: 'rgb' or 'flow'."""


def _split_leaf(name, leaves):
  """(unit path, leaf) for the first `leaves` entry `name` ends with, else None."""
  for leaf in leaves:
    if name.endswith('/' + leaf):
      return name[:-len(leaf) - 1], leaf
  return None


def slim_to_deepmind_name(variable_name, deepmind_scope='RGB/inception_i3d',
                          model_scope='InceptionV1'):
  """'InceptionV1/Mixed_3b/Branch_1/Conv3d_0b_3x3/weights' ->
  'RGB/inception_i3d/Mixed_3b/Branch_1/Conv3d_0b_3x3/conv_3d/w'.

  Returns None for a name outside `model_scope` or with no DeepMind counterpart.
  """
  prefix = model_scope.rstrip('/') + '/'
  if not variable_name.startswith(prefix):
    return None
  split = _split_leaf(variable_name[len(prefix):], _LEAF_TO_DEEPMIND)
  if split is None:
    return None
  unit, leaf = split
  unit = _UNIT_TO_DEEPMIND.get(unit, unit)
  return f'{deepmind_scope}/{unit}/{_LEAF_TO_DEEPMIND[leaf]}'


def deepmind_to_slim_name(checkpoint_name, model_scope='InceptionV1'):
  """'Flow/inception_i3d/Conv3d_1a_7x7/batch_norm/beta' ->
  'InceptionV1/Conv3d_1a_7x7/BatchNorm/beta'.

  Returns None for names that are not model variables of a DeepMind I3D (optimizer
  slots such as '.../conv_3d/w/Momentum', global_step, other scopes).
  """
  for scope in _DEEPMIND_SCOPES:
    if checkpoint_name.startswith(scope + '/'):
      split = _split_leaf(checkpoint_name[len(scope) + 1:], _LEAF_FROM_DEEPMIND)
      if split is None:
        return None
      unit, leaf = split
      unit = _UNIT_FROM_DEEPMIND.get(unit, unit)
      return f'{model_scope}/{unit}/{_LEAF_FROM_DEEPMIND[leaf]}'
  return None


def _modality_of_kernel(name, shape):
  """'rgb' or 'flow' from a first kernel [7, 7, 7, channels, 64]; ValueError else."""
  channels = list(shape)[3] if len(shape) == 5 else None
  for modality, count in MODALITIES.items():
    if channels == count:
      return modality
  raise ValueError(f'{name} has shape {list(shape)}; an I3D first kernel is '
                   '[7, 7, 7, 3, width] (rgb) or [7, 7, 7, 2, width] (flow)')


def _deepmind_streams(names_and_shapes):
  """[(scope, modality)] of every DeepMind I3D stream in the checkpoint."""
  streams = []
  for scope, prefix_modality in _DEEPMIND_SCOPES.items():
    kernel = f'{scope}/{FIRST_UNIT}/conv_3d/w'
    if kernel not in names_and_shapes:
      continue
    modality = _modality_of_kernel(kernel, names_and_shapes[kernel])
    if prefix_modality not in (None, modality):
      raise ValueError(f'{kernel} is a {modality} kernel under a {prefix_modality} '
                       'prefix; the checkpoint is inconsistent')
    streams.append((scope, modality))
  return streams


def _unrecognised(names_and_shapes, model_scope):
  if f'{model_scope}/Conv2d_1a_7x7/weights' in names_and_shapes:
    return ValueError(f'the checkpoint is a 2-D Inception-v1 ({model_scope}/Conv2d_1a_7x7/'
                      'weights); inflate it to I3D first: python -m nets.inflate '
                      '--checkpoint_2d=CHECKPOINT --output=PREFIX')
  shown = ', '.join(sorted(names_and_shapes)[:3]) or 'no variables at all'
  return ValueError(
      f'the checkpoint is not an I3D one: expected {model_scope}/{FIRST_UNIT}/weights '
      f'(slim naming) or [RGB/|Flow/]inception_i3d/{FIRST_UNIT}/conv_3d/w (DeepMind '
      f'kinetics-i3d), found {shown}, ...')


def _wrong_modality(found, scopes, modality):
  return ValueError(
      f'the checkpoint holds a {found} I3D ({", ".join(scopes)}, first kernel with '
      f'{MODALITIES[found]} input channels) but the model takes {modality} input '
      f'({MODALITIES[modality]} channels); use a {modality} checkpoint')


def checkpoint_naming(names_and_shapes, model_scope='InceptionV1', modality='rgb'):
  """Recognises the checkpoint's naming and the stream that fits `modality`.

  Args:
    names_and_shapes: dict checkpoint name -> shape, as
      `tf.train.NewCheckpointReader(path).get_variable_to_shape_map()`.
    model_scope: the top scope of the model's variables.
    modality: 'rgb' (3 input channels) or 'flow' (2).

  Returns:
    A CheckpointNaming. A two-stream checkpoint (RGB/ and Flow/) gives the stream
    matching `modality`.

  Raises:
    ValueError: unknown modality; a checkpoint of the other modality; or one that is
      neither slim- nor DeepMind-named (the message says what was expected).
  """
  if modality not in MODALITIES:
    raise ValueError(f'modality={modality!r}; valid: {", ".join(MODALITIES)}')
  slim_kernel = f'{model_scope}/{FIRST_UNIT}/weights'
  if slim_kernel in names_and_shapes:
    streams = [(model_scope, _modality_of_kernel(slim_kernel,
                                                 names_and_shapes[slim_kernel]))]
    naming = 'slim'
  else:
    streams = _deepmind_streams(names_and_shapes)
    naming = 'deepmind'
  if not streams:
    raise _unrecognised(names_and_shapes, model_scope)
  for scope, found in streams:
    if found == modality:
      return CheckpointNaming(naming, scope, modality)
  raise _wrong_modality(streams[0][1], [scope for scope, _ in streams], modality)


def name_map_for_checkpoint(names_and_shapes, model_scope='InceptionV1', modality='rgb'):
  """The `name_map` for plan_restore: None for slim names, else a translating function.

  Args and Raises: as checkpoint_naming.

  Returns:
    None when the checkpoint uses our names (restore directly), or
    fn(variable op name) -> DeepMind checkpoint name, None for a variable with no
    counterpart (plan_restore then counts it missing).
  """
  found = checkpoint_naming(names_and_shapes, model_scope, modality)
  if found.naming == 'slim':
    return None

  def name_map(variable_name):
    return slim_to_deepmind_name(variable_name, found.scope, model_scope)
  name_map.checkpoint_naming = found
  return name_map
