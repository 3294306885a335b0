"""nets/inflation.py: a 2-D Inception-v1 checkpoint (tf_slim.nets.inception_v1) into I3D.

The 2-D checkpoint is written here by tf_slim's own Inception-v1 with random, He-scaled
kernels and non-trivial batch norm statistics, so a wrong copy or a wrong scale shows.
"""

import math
import os

import numpy as np
import pytest
from tf_slim.nets import inception_v1

from tf_compat import tf, slim
from nets import i3d
from nets import inflation
from nets.i3d_checkpoints import name_map_for_checkpoint
from checkpoints.restore import plan_fine_tuning
from core.params import ConfigError

# I3D end point -> tf_slim's 2-D end point.
END_POINTS_2D = {
    'Conv3d_1a_7x7': 'Conv2d_1a_7x7', 'MaxPool3d_2a_3x3': 'MaxPool_2a_3x3',
    'Conv3d_2b_1x1': 'Conv2d_2b_1x1', 'Conv3d_2c_3x3': 'Conv2d_2c_3x3',
    'MaxPool3d_3a_3x3': 'MaxPool_3a_3x3', 'Mixed_3b': 'Mixed_3b', 'Mixed_3c': 'Mixed_3c',
    'MaxPool3d_4a_3x3': 'MaxPool_4a_3x3', 'Mixed_4b': 'Mixed_4b', 'Mixed_4c': 'Mixed_4c',
    'Mixed_4d': 'Mixed_4d', 'Mixed_4e': 'Mixed_4e', 'Mixed_4f': 'Mixed_4f',
    'MaxPool3d_5a_2x2': 'MaxPool_5a_2x2', 'Mixed_5b': 'Mixed_5b', 'Mixed_5c': 'Mixed_5c',
}

# Along time, per I3D end point: ('conv' | 'pool', kernel, stride). A Mixed block is a
# 3-tap conv (branches 1 and 2) beside a 3-tap stride-1 pool (branch 3).
TIME_LAYERS = {
    'Conv3d_1a_7x7': ('conv', 7, 2), 'MaxPool3d_2a_3x3': ('pool', 1, 1),
    'Conv3d_2b_1x1': ('conv', 1, 1), 'Conv3d_2c_3x3': ('conv', 3, 1),
    'MaxPool3d_3a_3x3': ('pool', 1, 1), 'MaxPool3d_4a_3x3': ('pool', 3, 2),
    'MaxPool3d_5a_2x2': ('pool', 2, 2),
}


def _unpadded_positions(frames):
  """end point -> time positions whose value no zero padding in time has touched.

  A SAME conv pads the clip ends with zeros: an inflated kernel summed over fewer
  real frames than its taps no longer adds up to the 2-D kernel. A SAME max pool
  ignores padding, but spreads already-touched values. TF pads (total // 2) before.
  """
  exact, size, result = set(range(frames)), frames, {}
  for end_point in END_POINTS_2D:
    steps = [('conv', 3, 1), ('pool', 3, 1)] if end_point.startswith('Mixed') else [
        TIME_LAYERS[end_point]]
    outputs = []
    for kind, kernel, stride in steps:
      out = math.ceil(size / stride)
      before = max((out - 1) * stride + kernel - size, 0) // 2
      windows = [range(i * stride - before, i * stride - before + kernel)
                 for i in range(out)]
      if kind == 'pool':  # padding is ignored, only real frames count
        windows = [[j for j in window if 0 <= j < size] for window in windows]
      outputs.append({i for i, window in enumerate(windows)
                      if all(j in exact for j in window)})
    exact, size = set.intersection(*outputs), out
    result[end_point] = sorted(exact)
  return result


@pytest.fixture(scope='module')
def inflated(checkpoint_2d, tmp_path_factory):
  """(prefix, InflateReport) of the 2-D checkpoint inflated to 400 classes."""
  output = str(tmp_path_factory.mktemp('i3d') / 'i3d.ckpt')
  report = inflation.inflate_checkpoint(inflation.InflateConfig(
      checkpoint_2d=checkpoint_2d[0], output=output, num_classes=400))
  return output, report


def test_unpadded_positions_reference():
  """At 64 frames the padding reaches every Mixed_5c position; 109 frames leave one."""
  assert _unpadded_positions(64)['Conv3d_1a_7x7'] == list(range(1, 30))
  assert _unpadded_positions(64)['Mixed_4f'] == [7]
  assert _unpadded_positions(64)['Mixed_5c'] == []
  assert _unpadded_positions(108)['Mixed_5c'] == [6]
  assert _unpadded_positions(109)['Mixed_5c'] == [6, 7]


def test_inflate_kernel_repeats_and_divides():
  kernel = np.random.RandomState(0).randn(3, 3, 4, 5).astype(np.float32)
  inflated = inflation.inflate_kernel(kernel, 3)
  assert inflated.shape == (3, 3, 3, 4, 5) and inflated.dtype == np.float32
  for t in range(3):
    np.testing.assert_array_equal(inflated[t], kernel / np.float32(3))
  np.testing.assert_allclose(inflated.sum(axis=0), kernel, rtol=1e-6)


@pytest.mark.parametrize('ours,theirs', [
    ('InceptionV1/Conv3d_1a_7x7/weights', 'InceptionV1/Conv2d_1a_7x7/weights'),
    ('InceptionV1/Mixed_3b/Branch_1/Conv3d_0b_3x3/BatchNorm/beta',
     'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/BatchNorm/beta'),
    ('InceptionV1/Mixed_5b/Branch_2/Conv3d_0b_3x3/weights',
     'InceptionV1/Mixed_5b/Branch_2/Conv2d_0a_3x3/weights'),
    ('InceptionV1/Mixed_5c/Branch_2/Conv3d_0b_3x3/weights',
     'InceptionV1/Mixed_5c/Branch_2/Conv2d_0b_3x3/weights'),
    ('InceptionV1/Logits/Conv3d_0c_1x1/biases', 'InceptionV1/Logits/Conv2d_0c_1x1/biases'),
])
def test_source_names_follow_tf_slim(ours, theirs):
  assert inflation.source_name(ours) == theirs


def test_checkpoint_holds_the_inflated_values(checkpoint_2d, inflated):
  _, values_2d = checkpoint_2d
  prefix, report = inflated
  reader = tf.train.NewCheckpointReader(prefix)
  assert len(reader.get_variable_to_shape_map()) == 230
  assert (len(report.inflated), len(report.copied)) == (57, 57 * 3)
  # 1001 ImageNet logits do not fit 400 classes: left at their initial values.
  assert report.initialised == ('InceptionV1/Logits/Conv3d_0c_1x1/weights',
                                'InceptionV1/Logits/Conv3d_0c_1x1/biases')
  first = reader.get_tensor('InceptionV1/Conv3d_1a_7x7/weights')
  assert first.shape == (7, 7, 7, 3, 64)
  for t in range(7):
    np.testing.assert_allclose(first[t], values_2d['InceptionV1/Conv2d_1a_7x7/weights'] / 7,
                               rtol=1e-6)
  quirk = reader.get_tensor('InceptionV1/Mixed_5b/Branch_2/Conv3d_0b_3x3/weights')
  np.testing.assert_allclose(
      quirk.sum(axis=0), values_2d['InceptionV1/Mixed_5b/Branch_2/Conv2d_0a_3x3/weights'],
      rtol=1e-5, atol=1e-7)
  for stat in ('beta', 'moving_mean', 'moving_variance'):
    name = f'InceptionV1/Mixed_4e/Branch_3/Conv{{}}d_0b_1x1/BatchNorm/{stat}'
    np.testing.assert_array_equal(reader.get_tensor(name.format(3)),
                                  values_2d[name.format(2)])


def _features_2d(prefix, image):
  """tf_slim's 2-D end points on `image` [1, S, S, 3], batch norm in inference mode."""
  with tf.Graph().as_default():
    with (slim.arg_scope(inception_v1.inception_v1_arg_scope()),
          slim.arg_scope([slim.batch_norm], is_training=False)):
      _, end_points = inception_v1.inception_v1_base(tf.constant(image))
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, prefix)
      return sess.run(end_points)


def _features_3d(prefix, clip):
  """(end points, pooled features) of the inflated I3D on `clip`, inference mode."""
  with tf.Graph().as_default():
    with slim.arg_scope(i3d.i3d_arg_scope()):
      pooled, end_points = i3d.i3d(tf.constant(clip), num_classes=0, is_training=False)
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, prefix)
      return sess.run((end_points, pooled))


def test_boring_video_gives_the_2d_features_where_time_padding_does_not_reach(
    checkpoint_2d, inflated):
  """The I3D property: one image repeated over time gives the 2-D network's features.

  It holds exactly only where no zero padding in time reached: a SAME 3-D conv pads
  the clip ends with zeros, so near the ends the inflated kernel sums over fewer real
  frames than its taps and no longer adds up to the 2-D kernel; Mixed blocks then
  spread that inwards. At 64 frames this reaches every Mixed_5c position (see
  test_unpadded_positions_reference), so the clip here is 128 frames: 16 Mixed_5c
  steps, 6..9 untouched, pooled (2-step windows) features 6..8 exact. Small frames
  (32x32) keep it fast; space is treated identically by both nets. Positions next to
  the ends must differ, or this test would not be testing the padding at all.
  """
  frames = 128
  image = np.random.RandomState(1).uniform(-1, 1, [1, 32, 32, 3]).astype(np.float32)
  clip = np.repeat(image[:, np.newaxis], frames, axis=1)
  end_points_2d = _features_2d(checkpoint_2d[0], image)
  end_points_3d, pooled = _features_3d(inflated[0], clip)
  exact = _unpadded_positions(frames)
  for end_point, name_2d in END_POINTS_2D.items():
    got = end_points_3d[end_point][:, exact[end_point]]
    want = np.broadcast_to(end_points_2d[name_2d][:, np.newaxis], got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=end_point)
  assert exact['Mixed_5c'] == [6, 7, 8, 9]
  pooled_2d = end_points_2d['Mixed_5c'].mean(axis=(1, 2))  # the whole 1x1 map
  assert pooled.shape == (1, 15, 1, 1, 1024)
  np.testing.assert_allclose(pooled[0, 6:9, 0, 0], np.repeat(pooled_2d, 3, axis=0),
                             rtol=1e-4, atol=1e-4)
  assert np.abs(pooled_2d).mean() > 0.1  # features of real size, not all zeros
  assert np.abs(pooled[0, 0, 0, 0] - pooled_2d[0]).max() > 1e-2


def test_training_restores_the_output_directly(inflated):
  prefix, _ = inflated
  shapes = tf.train.NewCheckpointReader(prefix).get_variable_to_shape_map()
  assert name_map_for_checkpoint(shapes, modality='rgb') is None
  with tf.Graph().as_default():
    with slim.arg_scope(i3d.i3d_arg_scope()):
      i3d.i3d(tf.zeros([1, 8, 32, 32, 3]), num_classes=400)
    plan = plan_fine_tuning(prefix, slim.get_model_variables())
  assert len(plan.restored) == 230 and not (plan.missing or plan.mismatched)
  assert sorted(os.listdir(os.path.dirname(prefix))) == [
      'i3d.ckpt.data-00000-of-00001', 'i3d.ckpt.index']


def _write(prefix, values):
  with tf.Graph().as_default():
    variables = [tf.Variable(value, name=name) for name, value in values.items()]
    with tf.Session() as sess:
      sess.run(tf.variables_initializer(variables))
      tf.train.Saver(variables).save(sess, prefix, write_meta_graph=False)
  return prefix


@pytest.mark.parametrize('case,message', [
    ('missing', r'--checkpoint_2d=.*/nowhere.ckpt: no such checkpoint'),
    ('resnet', r'is not a 2-D Inception-v1 checkpoint with tf_slim names: no '
               r'InceptionV1/Conv2d_1a_7x7/weights \(found global_step, resnet'),
    ('gamma', r'has batch norm scales \(InceptionV1/Conv2d_1a_7x7/BatchNorm/gamma'),
    ('narrow', r'InceptionV1/Conv2d_1a_7x7/weights is \[7, 7, 3, 32\], I3D\'s '
               r'InceptionV1/Conv3d_1a_7x7/weights is \[7, 7, 7, 3, 64\] at '
               r'--depth_multiplier=1.0'),
])
def test_bad_checkpoints_are_refused_before_writing(tmp_path, case, message):
  sources = {
      'missing': None,
      'resnet': {'resnet_v1_50/conv1/weights': np.zeros([7, 7, 3, 64], np.float32),
                 'global_step': np.int64(0)},
      'gamma': {'InceptionV1/Conv2d_1a_7x7/weights': np.zeros([7, 7, 3, 64], np.float32),
                'InceptionV1/Conv2d_1a_7x7/BatchNorm/gamma': np.ones(64, np.float32)},
      'narrow': {'InceptionV1/Conv2d_1a_7x7/weights': np.zeros([7, 7, 3, 32],
                                                               np.float32)},
  }
  source = str(tmp_path / 'nowhere.ckpt')
  if sources[case] is not None:
    source = _write(str(tmp_path / 'source.ckpt'), sources[case])
  output = tmp_path / 'out' / 'i3d.ckpt'
  with pytest.raises(ConfigError, match=message):
    inflation.inflate_checkpoint(inflation.InflateConfig(checkpoint_2d=source,
                                                     output=str(output)))
  assert not output.parent.exists()


@pytest.mark.parametrize('kwargs,message', [
    (dict(output='x'), '--checkpoint_2d is required'),
    (dict(checkpoint_2d='x'), '--output is required'),
    (dict(checkpoint_2d='x', output='y', num_classes=-1), '--num_classes=-1: must be'),
    (dict(checkpoint_2d='x', output='y', depth_multiplier=0.0),
     '--depth_multiplier=0.0: must be > 0'),
])
def test_config_is_checked(kwargs, message):
  with pytest.raises(ConfigError, match=message):
    inflation.InflateConfig(**kwargs)


def test_existing_output_is_refused(checkpoint_2d, inflated):
  with pytest.raises(ConfigError, match='already holds a checkpoint'):
    inflation.inflate_checkpoint(inflation.InflateConfig(
        checkpoint_2d=checkpoint_2d[0], output=inflated[0]))


def test_failed_write_leaves_nothing(checkpoint_2d, tmp_path, monkeypatch):
  real_replace = os.replace

  def replace_fails_on_the_index(source, target):
    if target.endswith('.index'):
      raise OSError(28, 'No space left on device')
    real_replace(source, target)
  monkeypatch.setattr(inflation.os, 'replace', replace_fails_on_the_index)
  with pytest.raises(OSError, match='No space left'):
    inflation.inflate_checkpoint(inflation.InflateConfig(
        checkpoint_2d=checkpoint_2d[0], output=str(tmp_path / 'i3d.ckpt')))
  assert os.listdir(tmp_path) == []
