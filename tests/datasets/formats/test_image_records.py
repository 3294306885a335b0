"""Record keys and the graph-mode parser, checked against Pillow-encoded images."""

import io

import numpy as np
import pytest
from PIL import Image

from datasets.formats import image_records
from tf_compat import tf


def _encode(array, image_format):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format=image_format)
  return buffer.getvalue()


def _parse(serialized, num_channels):
  with tf.Graph().as_default(), tf.Session() as sess:
    image, label = image_records.parse_image_example(tf.constant(serialized), num_channels)
    assert image.shape.as_list() == [None, None, num_channels]
    assert image.dtype == tf.uint8 and label.dtype == tf.int64
    return sess.run([image, label])


def test_example_keys():
  example = image_records.image_to_example(b'bytes', 'png', 7, 5, 6, 1)
  features = example.features.feature
  assert sorted(features) == ['image/channels', 'image/class/label', 'image/encoded',
                              'image/format', 'image/height', 'image/width']
  assert features['image/encoded'].bytes_list.value == [b'bytes']
  assert features['image/format'].bytes_list.value == [b'png']
  assert [features[k].int64_list.value[0] for k in (
      'image/class/label', 'image/height', 'image/width', 'image/channels')] == [7, 5, 6, 1]


def test_bad_format_is_refused():
  with pytest.raises(ValueError, match="b'png', b'jpeg'"):
    image_records.image_to_example(b'x', b'gif', 0, 1, 1, 3)


def test_png_round_trip_grey_and_rgb():
  rng = np.random.RandomState(0)
  grey = rng.randint(0, 256, size=(5, 7), dtype=np.uint8)
  rgb = rng.randint(0, 256, size=(4, 6, 3), dtype=np.uint8)
  image, label = _parse(image_records.image_to_example(
      _encode(grey, 'PNG'), b'png', 3, 5, 7, 1).SerializeToString(), 1)
  np.testing.assert_array_equal(image[:, :, 0], grey)
  assert label == 3
  image, _ = _parse(image_records.image_to_example(
      _encode(rgb, 'PNG'), b'png', 0, 4, 6, 3).SerializeToString(), 3)
  np.testing.assert_array_equal(image, rgb)
  # Grey decoded as RGB repeats the grey value in every channel.
  image, _ = _parse(image_records.image_to_example(
      _encode(grey, 'PNG'), b'png', 0, 5, 7, 1).SerializeToString(), 3)
  np.testing.assert_array_equal(image, np.repeat(grey[:, :, None], 3, axis=2))


def test_jpeg_round_trip_close_to_pillow():
  smooth = np.add.outer(np.arange(16) * 8, np.arange(24) * 4).astype(np.uint8)
  rgb = np.stack([smooth, smooth // 2, 255 - smooth], axis=2)
  encoded = _encode(rgb, 'JPEG')
  image, _ = _parse(image_records.image_to_example(
      encoded, 'jpeg', 1, 16, 24, 3).SerializeToString(), 3)
  with Image.open(io.BytesIO(encoded)) as reference:
    # Two JPEG decoders may differ by a unit or two in a few pixels.
    assert np.abs(image.astype(int) - np.asarray(reference).astype(int)).max() <= 3
