"""Tests of datasets/inputs/synthetic_input.py: zeros shaped like the real batches."""

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import input_factory
from datasets.inputs.input_factory import IMAGE, InputSettings
from datasets.inputs.synthetic_input import SyntheticInput
from tf_compat import tf


class _ClipLikeInput:
  """A stand-in real input yielding (uint8 clips, labels, flips), finished by the clip
  input's own finish."""
  kind = 'video'

  def __init__(self, batch_shape=(2, 3, 4, 4, 3)):
    self.batch_shape = batch_shape

  def dataset(self, split, settings):
    del split, settings
    return tf.data.Dataset.from_tensors((
        tf.fill(self.batch_shape, tf.constant(7, tf.uint8)),
        tf.ones([self.batch_shape[0]], tf.int64),
        tf.ones([self.batch_shape[0]], tf.bool))).repeat()

  def finish(self, batch, split):
    return input_factory.ClipInput().finish(batch, split)

  def describe(self, settings, split):
    del settings, split
    return 'clip-like'


def _first_batch(pipeline, split, settings):
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(pipeline.dataset(split, settings)).get_next()
    finished = pipeline.finish(batch, split)
    with tf.Session() as sess:
      return sess.run([batch, finished])


def test_image_batches_are_zeros_of_the_real_shape_and_type(digits_dir):
  split = dataset_factory.get_dataset('digits', 'train', digits_dir)
  real = input_factory.get_input(IMAGE)
  settings = InputSettings(batch_size=4, image_size=28, preprocessing_name='lenet')
  synthetic = SyntheticInput(real)
  assert synthetic.kind == IMAGE
  with tf.Graph().as_default():
    assert synthetic.dataset(split, settings).element_spec == real.dataset(
        split, settings).element_spec
  (images, labels), _ = _first_batch(synthetic, split, settings)
  assert images.shape == (4, 28, 28, 1) and images.dtype == np.float32
  assert not images.any() and list(labels) == [0, 0, 0, 0]
  assert synthetic.describe(settings, split) == (
      'synthetic zeros shaped as 28x28 images (lenet preprocessing)')


def test_clip_batches_keep_their_structure_and_are_finished_by_the_real_input():
  split = dataset_factory.DatasetSplit(
      name='video_folder', split_name='train', dataset_dir='', file_pattern='',
      num_samples=1, num_classes=2, labels_to_names={}, num_channels=3, modality='rgb')
  (clips, labels, flips), (finished, _) = _first_batch(
      SyntheticInput(_ClipLikeInput()), split, None)
  assert clips.dtype == np.uint8 and clips.shape == (2, 3, 4, 4, 3) and not clips.any()
  assert labels.dtype == np.int64 and flips.dtype == np.bool_ and not flips.any()
  np.testing.assert_array_equal(finished, np.full((2, 3, 4, 4, 3), -1.0, np.float32))


def test_a_dynamic_batch_shape_is_refused():
  split = dataset_factory.DatasetSplit(
      name='video_folder', split_name='train', dataset_dir='', file_pattern='',
      num_samples=1, num_classes=2, labels_to_names={}, num_channels=3, modality='rgb')

  class _Dynamic(_ClipLikeInput):
    def dataset(self, split, settings):
      return super().dataset(split, settings).unbatch().batch(2)   # last batch may be short

  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='needs static batch shapes; _Dynamic yields'):
      SyntheticInput(_Dynamic()).dataset(split, None)
