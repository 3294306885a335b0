"""The tf.data pipeline on converted digits: shapes, coverage, order, sharding, offsets."""

import collections

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import image_input
from datasets.inputs.input_settings import InputSettings
from tf_compat import tf


def _all_batches(dataset):
  """Runs a finite dataset to the end -> (images, labels) concatenated."""
  images, labels = [], []
  with tf.Graph().as_default() as graph, tf.Session(graph=graph) as sess:
    next_batch = tf.data.make_one_shot_iterator(dataset()).get_next()
    while True:
      try:
        image_batch, label_batch = sess.run(next_batch)
      except tf.errors.OutOfRangeError:
        break
      images.append(image_batch)
      labels.append(label_batch)
  return np.concatenate(images), np.concatenate(labels)


def _eval_dataset(split, **overrides):
  """A builder for one evaluation pass, lenet at the native 8x8 (so pixels are invertible)."""
  fields = dict(batch_size=50, image_size=8, preprocessing_name='lenet', num_epochs=1,
                drop_remainder=False, seed=0)
  fields.update(overrides)
  return lambda: image_input.build_image_dataset(split, InputSettings(**fields),
                                                 is_training=False)


def _record_keys(images, labels):
  """Multiset of (label, uint8 pixels) recovered from lenet's (x - 128) / 128."""
  pixels = np.round(images * 128.0 + 128.0).astype(np.uint8)
  return collections.Counter((int(l), p.tobytes()) for l, p in zip(labels, pixels))


def _reference_keys(split, helpers):
  """The same multiset read straight from the shards with Pillow."""
  return collections.Counter(
      (helpers.feature(e, 'image/class/label'),
       helpers.pil_decode(helpers.feature(e, 'image/encoded'), 'L')[:, :, None].tobytes())
      for e in helpers.read_examples(split.file_pattern))


@pytest.fixture(scope='module')
def test_split(digits_dir):
  return dataset_factory.get_dataset('digits', 'test', digits_dir)


def test_training_batches(test_split):
  with tf.Graph().as_default(), tf.Session() as sess:
    dataset = image_input.build_image_dataset(test_split, InputSettings(
        batch_size=16, image_size=28, preprocessing_name='cifarnet', num_readers=2,
        num_parallel_calls=2, shuffle_buffer_size=64), is_training=True)
    images, labels = tf.data.make_one_shot_iterator(dataset).get_next()
    assert images.shape.as_list() == [16, 28, 28, 1] and images.dtype == tf.float32
    assert labels.shape.as_list() == [16] and labels.dtype == tf.int64
    # Training repeats forever: more batches than one epoch holds.
    for _ in range(360 // 16 + 3):
      image_values, label_values = sess.run([images, labels])
    assert image_values.shape == (16, 28, 28, 1)
    assert set(label_values.tolist()) <= set(range(10))


def test_eval_covers_every_record_once_in_a_fixed_order(test_split, helpers):
  images, labels = _all_batches(_eval_dataset(test_split))
  assert images.shape == (360, 8, 8, 1) and images.dtype == np.float32
  assert labels.dtype == np.int64
  assert _record_keys(images, labels) == _reference_keys(test_split, helpers)
  images_again, labels_again = _all_batches(_eval_dataset(test_split))
  np.testing.assert_array_equal(labels, labels_again)
  np.testing.assert_array_equal(images, images_again)


def test_drop_remainder_gives_a_static_batch(test_split):
  dataset = _eval_dataset(test_split, batch_size=50, drop_remainder=True)
  with tf.Graph().as_default():
    assert tf.data.get_output_shapes(dataset())[0].as_list() == [50, 8, 8, 1]
  images, _ = _all_batches(dataset)
  assert images.shape[0] == 350  # 7 full batches, the last 10 records dropped


def test_worker_shards_are_disjoint_and_complete(test_split):
  everything = _record_keys(*_all_batches(_eval_dataset(test_split)))
  parts = [_record_keys(*_all_batches(_eval_dataset(test_split, num_shards=2,
                                                    shard_index=index)))
           for index in (0, 1)]
  assert sum(parts[0].values()) == 180 and sum(parts[1].values()) == 180  # 2 of 4 files
  assert parts[0] + parts[1] == everything


def test_more_workers_than_files_is_refused(test_split):
  with pytest.raises(ValueError, match='num_shards=5 .* has 4; convert with '
                                       '--num_shards>=5'):
    image_input.build_image_dataset(test_split, InputSettings(
        batch_size=8, image_size=8, preprocessing_name='lenet', num_shards=5, shard_index=0),
                                    is_training=True)


def test_labels_offset(test_split):
  _, labels = _all_batches(_eval_dataset(test_split))
  _, shifted = _all_batches(_eval_dataset(test_split, labels_offset=1))
  np.testing.assert_array_equal(shifted, labels - 1)


@pytest.mark.parametrize('overrides, message', [
    ({'batch_size': 0}, 'batch_size=0'),
    ({'shard_index': 2, 'num_shards': 2}, 'shard_index=2'),
    ({'labels_offset': 10}, 'labels_offset=10'),
    ({'num_epochs': 0}, 'num_epochs=0'),
    ({'preprocessing_name': 'vgg'}, 'valid names'),
])
def test_bad_arguments(test_split, overrides, message):
  with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
    _eval_dataset(test_split, **overrides)()
