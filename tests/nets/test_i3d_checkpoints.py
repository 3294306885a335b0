"""Name maps for DeepMind kinetics-i3d checkpoints, checked on checkpoints written here.

The checkpoints carry DeepMind's exact names and shapes, written out below from the
published widths (Sonnet's batch norm keeps [1, 1, 1, 1, C]; Mixed_5b/Branch_2's 3x3
conv is Conv3d_0a_3x3 there), with random values. Loading one through the name map
must give the same logits as assigning the same values to the variables by hand.
"""

import numpy as np
import pytest

from tf_compat import tf, slim
from nets import i3d
from nets import i3d_checkpoints
from nets.i3d_checkpoints import (checkpoint_naming, deepmind_to_slim_name,
                                  name_map_for_checkpoint, slim_to_deepmind_name)

# Mixed widths (branch 0, 1a, 1b, 2a, 2b, 3b), as published.
WIDTHS = {
    'Mixed_3b': (64, 96, 128, 16, 32, 32), 'Mixed_3c': (128, 128, 192, 32, 96, 64),
    'Mixed_4b': (192, 96, 208, 16, 48, 64), 'Mixed_4c': (160, 112, 224, 24, 64, 64),
    'Mixed_4d': (128, 128, 256, 24, 64, 64), 'Mixed_4e': (112, 144, 288, 32, 64, 64),
    'Mixed_4f': (256, 160, 320, 32, 128, 128), 'Mixed_5b': (256, 160, 320, 32, 128, 128),
    'Mixed_5c': (384, 192, 384, 48, 128, 128),
}

# The published checkpoints: (scope, input channels, classes, has Momentum slots).
FORMS = {
    'rgb_imagenet': ('RGB/inception_i3d', 3, 400, False),
    'flow_imagenet': ('Flow/inception_i3d', 2, 400, False),
    'rgb_scratch_kin600': ('inception_i3d', 3, 600, True),
}


def _deepmind_units(in_channels):
  """(DeepMind unit path, kernel [t, h, w, in, out]) of every conv unit but logits."""
  units = [('Conv3d_1a_7x7', [7, 7, 7, in_channels, 64]),
           ('Conv3d_2b_1x1', [1, 1, 1, 64, 64]), ('Conv3d_2c_3x3', [3, 3, 3, 64, 192])]
  channels = 192
  for block, (b0, b1a, b1b, b2a, b2b, b3) in WIDTHS.items():
    # DeepMind kept tf_slim's old name for this one conv.
    second = 'Conv3d_0a_3x3' if block == 'Mixed_5b' else 'Conv3d_0b_3x3'
    units += [(f'{block}/Branch_0/Conv3d_0a_1x1', [1, 1, 1, channels, b0]),
              (f'{block}/Branch_1/Conv3d_0a_1x1', [1, 1, 1, channels, b1a]),
              (f'{block}/Branch_1/Conv3d_0b_3x3', [3, 3, 3, b1a, b1b]),
              (f'{block}/Branch_2/Conv3d_0a_1x1', [1, 1, 1, channels, b2a]),
              (f'{block}/Branch_2/{second}', [3, 3, 3, b2a, b2b]),
              (f'{block}/Branch_3/Conv3d_0b_1x1', [1, 1, 1, channels, b3])]
    channels = b0 + b1b + b2b + b3
  return units


def deepmind_shapes(scope, in_channels=3, num_classes=400, momentum_slots=False):
  """name -> shape of a DeepMind kinetics-i3d checkpoint."""
  shapes = {}
  for unit, kernel in _deepmind_units(in_channels):
    shapes[f'{scope}/{unit}/conv_3d/w'] = kernel
    for stat in ('beta', 'moving_mean', 'moving_variance'):
      shapes[f'{scope}/{unit}/batch_norm/{stat}'] = [1, 1, 1, 1, kernel[-1]]
  shapes[f'{scope}/Logits/Conv3d_0c_1x1/conv_3d/w'] = [1, 1, 1, 1024, num_classes]
  shapes[f'{scope}/Logits/Conv3d_0c_1x1/conv_3d/b'] = [num_classes]
  if momentum_slots:
    trainable = [n for n in shapes if not n.split('/')[-1].startswith('moving_')]
    shapes.update({f'{name}/Momentum': shapes[name] for name in trainable})
    shapes['global_step'] = []
  return shapes


def _our_name(deepmind_name):
  """Our variable for a DeepMind name, spelled out rule by rule; None for slots."""
  if deepmind_name.endswith('/Momentum') or deepmind_name == 'global_step':
    return None
  path = deepmind_name.split('inception_i3d/', 1)[1]
  path = path.replace('Mixed_5b/Branch_2/Conv3d_0a_3x3', 'Mixed_5b/Branch_2/Conv3d_0b_3x3')
  path = path.replace('/conv_3d/w', '/weights').replace('/conv_3d/b', '/biases')
  return 'InceptionV1/' + path.replace('/batch_norm/', '/BatchNorm/')


def _random_values(shapes, rng):
  """He-scaled kernels and non-trivial batch norm values, so activations stay O(1)."""
  values = {}
  for name, shape in shapes.items():
    if name == 'global_step':
      values[name] = np.int64(1234)
    elif name.endswith('moving_variance'):
      values[name] = rng.uniform(0.5, 2.0, shape)
    elif name.endswith('conv_3d/w'):
      values[name] = rng.randn(*shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
    else:
      values[name] = rng.randn(*shape) * 0.2
  return {n: np.asarray(v, np.int64 if n == 'global_step' else np.float32)
          for n, v in values.items()}


def _write_checkpoint(prefix, values):
  """Writes `values` (name -> array) as a TF checkpoint, exactly under those names."""
  names = sorted(values)
  with tf.Graph().as_default():
    holders = [tf.placeholder(tf.as_dtype(values[n].dtype), values[n].shape)
               for n in names]
    save = tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                             shape_and_slices=[''] * len(names), tensors=holders)
    with tf.Session() as sess:
      sess.run(save, dict(zip(holders, (values[n] for n in names))))
  return prefix


def _build(channels, num_classes, frames=8, size=32, seed=0):
  clip = np.random.RandomState(seed).uniform(-1, 1, [2, frames, size, size, channels])
  with slim.arg_scope(i3d.i3d_arg_scope()):
    logits, _ = i3d.i3d(tf.constant(clip, tf.float32), num_classes=num_classes,
                        is_training=False)
  return logits


# --- names ------------------------------------------------------------------------

def test_deepmind_table_has_the_published_sizes():
  shapes = deepmind_shapes('RGB/inception_i3d')
  kernels = [s for n, s in shapes.items() if n.endswith('/w') and 'Logits' not in n]
  assert len(kernels) == 57 and len(shapes) == 57 * 4 + 2
  assert sum(int(np.prod(s)) for s in kernels) == 12_272_704


@pytest.mark.parametrize('ours,theirs', [
    ('InceptionV1/Conv3d_1a_7x7/weights', 'RGB/inception_i3d/Conv3d_1a_7x7/conv_3d/w'),
    ('InceptionV1/Conv3d_1a_7x7/BatchNorm/beta',
     'RGB/inception_i3d/Conv3d_1a_7x7/batch_norm/beta'),
    ('InceptionV1/Mixed_3b/Branch_1/Conv3d_0b_3x3/BatchNorm/moving_variance',
     'RGB/inception_i3d/Mixed_3b/Branch_1/Conv3d_0b_3x3/batch_norm/moving_variance'),
    ('InceptionV1/Mixed_5b/Branch_2/Conv3d_0b_3x3/weights',
     'RGB/inception_i3d/Mixed_5b/Branch_2/Conv3d_0a_3x3/conv_3d/w'),
    ('InceptionV1/Mixed_5c/Branch_2/Conv3d_0b_3x3/weights',
     'RGB/inception_i3d/Mixed_5c/Branch_2/Conv3d_0b_3x3/conv_3d/w'),
    ('InceptionV1/Logits/Conv3d_0c_1x1/biases',
     'RGB/inception_i3d/Logits/Conv3d_0c_1x1/conv_3d/b'),
])
def test_names_both_ways(ours, theirs):
  assert slim_to_deepmind_name(ours) == theirs
  assert deepmind_to_slim_name(theirs) == ours
  flow = theirs.replace('RGB/', 'Flow/')
  assert slim_to_deepmind_name(ours, 'Flow/inception_i3d') == flow
  assert deepmind_to_slim_name(flow) == ours
  assert deepmind_to_slim_name(theirs.replace('RGB/', '')) == ours


@pytest.mark.parametrize('name', ['global_step', 'inception_i3d/Conv3d_1a_7x7/conv_3d/w/'
                                  'Momentum', 'Other/Conv3d_1a_7x7/conv_3d/w'])
def test_non_model_names_have_no_slim_counterpart(name):
  assert deepmind_to_slim_name(name) is None


def test_names_outside_the_model_have_no_deepmind_counterpart():
  assert slim_to_deepmind_name('global_step') is None
  assert slim_to_deepmind_name('OtherNet/Conv3d_1a_7x7/weights') is None
  assert slim_to_deepmind_name('InceptionV1/Conv3d_1a_7x7/BatchNorm/gamma') is None


@pytest.fixture(scope='module')
def rgb_400_net():
  """(graph, logits) of the full rgb net with 400 classes, built once: the table test
  reads its variables, the rgb_imagenet restore runs it (adding its saver and assigns)."""
  with tf.Graph().as_default() as rgb_graph:
    logits = _build(channels=3, num_classes=400)
  return rgb_graph, logits


def test_every_variable_of_the_full_net_maps_onto_the_deepmind_table(rgb_400_net):
  rgb_graph, _ = rgb_400_net
  variables = rgb_graph.get_collection(tf.GraphKeys.MODEL_VARIABLES)
  for scope, _, _, _ in FORMS.values():
    table = deepmind_shapes(scope)
    mapped = {slim_to_deepmind_name(v.op.name, scope): v for v in variables}
    assert set(mapped) == set(table), scope
    for name, variable in mapped.items():
      shape = variable.shape.as_list()
      # Same values; Sonnet's batch norm keeps them as [1, 1, 1, 1, C].
      assert table[name] == ([1, 1, 1, 1] + shape if '/batch_norm/' in name else shape)
      assert _our_name(name) == variable.op.name


# --- recognising checkpoints ------------------------------------------------------

@pytest.mark.parametrize('form', list(FORMS))
def test_deepmind_checkpoints_are_recognised(form):
  scope, channels, classes, slots = FORMS[form]
  modality = 'flow' if channels == 2 else 'rgb'
  shapes = deepmind_shapes(scope, channels, classes, slots)
  assert checkpoint_naming(shapes, modality=modality) == ('deepmind', scope, modality)
  name_map = name_map_for_checkpoint(shapes, modality=modality)
  assert name_map('InceptionV1/Conv3d_2b_1x1/weights') == f'{scope}/Conv3d_2b_1x1/conv_3d/w'
  assert name_map('global_step') is None


def test_two_stream_checkpoint_gives_the_requested_stream():
  shapes = {**deepmind_shapes('RGB/inception_i3d'),
            **deepmind_shapes('Flow/inception_i3d', in_channels=2)}
  assert checkpoint_naming(shapes, modality='rgb').scope == 'RGB/inception_i3d'
  assert checkpoint_naming(shapes, modality='flow').scope == 'Flow/inception_i3d'


def test_slim_named_checkpoints_need_no_map():
  shapes = {'InceptionV1/Conv3d_1a_7x7/weights': [7, 7, 7, 2, 64],
            'InceptionV1/Conv3d_1a_7x7/BatchNorm/beta': [64]}
  assert name_map_for_checkpoint(shapes, modality='flow') is None
  assert checkpoint_naming(shapes, modality='flow') == ('slim', 'InceptionV1', 'flow')


@pytest.mark.parametrize('shapes,modality,found', [
    (deepmind_shapes('Flow/inception_i3d', in_channels=2), 'rgb', 'flow'),
    (deepmind_shapes('RGB/inception_i3d'), 'flow', 'rgb'),
    (deepmind_shapes('inception_i3d', num_classes=600, momentum_slots=True), 'flow', 'rgb'),
    ({'InceptionV1/Conv3d_1a_7x7/weights': [7, 7, 7, 3, 64]}, 'flow', 'rgb'),
])
def test_wrong_modality_fails_with_one_clear_line(shapes, modality, found):
  with pytest.raises(ValueError) as raised:
    name_map_for_checkpoint(shapes, modality=modality)
  message = str(raised.value)
  assert '\n' not in message
  assert f'holds a {found} I3D' in message
  assert f'the model takes {modality} input' in message


def test_prefix_and_kernel_disagreeing_is_refused():
  shapes = deepmind_shapes('RGB/inception_i3d', in_channels=2)
  with pytest.raises(ValueError, match='flow kernel under a rgb prefix'):
    checkpoint_naming(shapes)


def test_unknown_naming_says_what_was_expected():
  shapes = {'resnet_v1_50/conv1/weights': [7, 7, 3, 64], 'global_step': []}
  with pytest.raises(ValueError) as raised:
    name_map_for_checkpoint(shapes)
  message = str(raised.value)
  assert '\n' not in message
  assert ('expected InceptionV1/Conv3d_1a_7x7/weights (slim naming) or '
          '[RGB/|Flow/]inception_i3d/Conv3d_1a_7x7/conv_3d/w (DeepMind') in message
  assert 'found global_step, resnet_v1_50/conv1/weights' in message


def test_a_2d_inception_checkpoint_points_to_inflation():
  with pytest.raises(ValueError, match='2-D Inception-v1.*python -m nets.inflate'):
    name_map_for_checkpoint({'InceptionV1/Conv2d_1a_7x7/weights': [7, 7, 3, 64]})


def test_unknown_modality_is_refused():
  with pytest.raises(ValueError, match="modality='depth'; valid: rgb, flow"):
    checkpoint_naming(deepmind_shapes('RGB/inception_i3d'), modality='depth')
  assert i3d_checkpoints.MODALITIES == {'rgb': 3, 'flow': 2}


# --- restoring ----------------------------------------------------------------------

def _restore_through(name_map, prefix):
  """What a fine-tuning restore does with a name map: a Saver keyed by checkpoint name.

  reshape=True because Sonnet keeps batch norm values as [1, 1, 1, 1, C].
  """
  return tf.train.Saver({name_map(v.op.name): v for v in slim.get_model_variables()},
                        reshape=True)


def _assign(sess, values_by_variable):
  """Assigns every value in one run (one `Variable.load` per variable is slow)."""
  holders = {v: tf.placeholder(v.dtype.base_dtype, v.shape) for v in values_by_variable}
  sess.run([tf.assign(v, holders[v]) for v in values_by_variable],
           {holders[v]: value for v, value in values_by_variable.items()})


@pytest.mark.parametrize('form', list(FORMS))
def test_deepmind_checkpoint_restores_like_assigning_by_hand(tmp_path, form, request):
  scope, channels, classes, slots = FORMS[form]
  values = _random_values(deepmind_shapes(scope, channels, classes, slots),
                          np.random.RandomState(1))
  prefix = _write_checkpoint(str(tmp_path / 'model.ckpt'), values)
  shapes = tf.train.NewCheckpointReader(prefix).get_variable_to_shape_map()
  name_map = name_map_for_checkpoint(shapes, modality='flow' if channels == 2 else 'rgb')
  # The rgb 400-class net is the module's (one I3D build less); the others are built here.
  net_graph, logits = (request.getfixturevalue('rgb_400_net') if (channels, classes) == (
      3, 400) else (tf.Graph(), None))
  with net_graph.as_default():
    if logits is None:
      logits = _build(channels, classes)
    saver = _restore_through(name_map, prefix)
    by_name = {v.op.name: v for v in tf.global_variables()}
    by_hand = {}
    for name, value in values.items():
      if _our_name(name):
        variable = by_name.pop(_our_name(name))
        by_hand[variable] = value.reshape(variable.shape.as_list())
    assert not by_name  # every variable gets a value by hand
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      fresh_logits = sess.run(logits)
      _assign(sess, by_hand)
      logits_by_hand = sess.run(logits)
      sess.run(tf.global_variables_initializer())
      saver.restore(sess, prefix)
      restored_logits = sess.run(logits)
  assert restored_logits.shape == (2, classes)
  np.testing.assert_array_equal(restored_logits, logits_by_hand)
  assert np.abs(restored_logits - fresh_logits).max() > 1e-3
  assert np.all(np.isfinite(restored_logits)) and np.abs(restored_logits).max() < 1e3
