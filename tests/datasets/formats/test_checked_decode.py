"""Decoding past the values that fail: every row decoded, the failures flagged and zeroed.
JPEGs are made and decoded with Pillow (the independent reference)."""

import io

import numpy as np
import pytest
from PIL import Image

from datasets.formats import checked_decode
from tf_compat import tf


def _jpeg(seed, size=(12, 16)):
  pixels = np.random.RandomState(seed).randint(0, 256, size + (3,)).astype(np.uint8)
  buffer = io.BytesIO()
  Image.fromarray(pixels).save(buffer, format='JPEG', quality=90)
  return buffer.getvalue()


def _pil(jpeg):
  with Image.open(io.BytesIO(jpeg)) as image:
    return np.asarray(image.convert('RGB'))


@pytest.mark.parametrize('parallel', [None, 2])
def test_map_checked_decodes_the_rest_and_flags_the_failures(parallel):
  good = [_jpeg(seed) for seed in range(5)]
  values = list(good)
  values[1] = good[1][:len(good[1]) // 2]   # cut short: libjpeg stops
  values[4] = b'not a jpeg'
  with tf.Graph().as_default():
    jpegs = tf.placeholder(tf.string, [None])
    outputs, ok = checked_decode.map_checked(
        jpegs, lambda j: tf.io.decode_jpeg(j, channels=3, dct_method='INTEGER_ACCURATE'),
        [12, 16, 3], tf.uint8, num_parallel_calls=parallel)
    with tf.Session() as sess:
      frames, flags = sess.run([outputs, ok], {jpegs: values})
      all_bad, none_ok = sess.run([outputs, ok], {jpegs: [b'x', b'y']})
  assert list(flags) == [True, False, True, True, False]
  for index in (0, 2, 3):
    np.testing.assert_array_equal(frames[index], _pil(good[index]))
  assert not frames[1].any() and not frames[4].any()
  assert all_bad.shape == (2, 12, 16, 3) and not all_bad.any() and not none_ok.any()
