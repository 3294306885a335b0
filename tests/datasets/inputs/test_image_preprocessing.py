"""Preprocessing by name: shapes and ranges for 1 and 3 channels, NumPy references."""

import numpy as np
import pytest

from datasets.inputs import image_preprocessing
from tf_compat import tf

NAMES = ['cifarnet', 'inception', 'lenet']


def _run(name, is_training, image, height, width, runs=1):
  """Preprocesses a uint8 numpy image `runs` times -> list of float32 arrays."""
  with tf.Graph().as_default(), tf.Session() as sess:
    preprocess = image_preprocessing.get_preprocessing(name, is_training)
    output = preprocess(tf.constant(image), height, width)
    assert output.dtype == tf.float32
    assert output.shape.as_list() == [height, width, image.shape[-1]]
    return [sess.run(output) for _ in range(runs)]


def _random_image(height, width, channels, seed=0):
  return np.random.RandomState(seed).randint(0, 256, (height, width, channels)).astype(np.uint8)


def _bilinear_half_pixel(image, height, width):
  """NumPy reference of TF 2 bilinear resize (half-pixel centres, no antialias)."""
  def axis(out_size, in_size):
    position = np.clip((np.arange(out_size) + 0.5) * in_size / out_size - 0.5, 0, in_size - 1)
    low = np.floor(position).astype(int)
    return low, np.minimum(low + 1, in_size - 1), position - low
  image = image.astype(np.float64)
  top, bottom, dy = axis(height, image.shape[0])
  left, right, dx = axis(width, image.shape[1])
  rows = image[top] * (1 - dy)[:, None, None] + image[bottom] * dy[:, None, None]
  return rows[:, left] * (1 - dx)[None, :, None] + rows[:, right] * dx[None, :, None]


def test_registry():
  assert image_preprocessing.list_preprocessing() == NAMES
  with pytest.raises(ValueError, match="'vgg' is not known; valid names: cifarnet, "
                                       'inception, lenet'):
    image_preprocessing.get_preprocessing('vgg', True)
  with pytest.raises(ValueError, match='already registered'):
    image_preprocessing.register_preprocessing('lenet', None, None)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('is_training', [True, False])
@pytest.mark.parametrize('channels', [1, 3])
def test_shapes_and_ranges(name, is_training, channels):
  image = _random_image(30, 20, channels)
  for output in _run(name, is_training, image, 24, 16, runs=3):
    assert output.shape == (24, 16, channels)
    assert np.all(np.isfinite(output))
    if name == 'lenet':
      assert output.min() >= -1.0 and output.max() <= 127.0 / 128.0
    elif name == 'inception':
      assert output.min() >= -1.0 - 1e-6 and output.max() <= 1.0 + 1e-6
    else:  # per-image standardization
      assert abs(output.mean()) < 1e-3 and abs(output.std() - 1.0) < 1e-2


@pytest.mark.parametrize('channels', [1, 3])
def test_lenet_equals_the_numpy_formula(channels):
  image = _random_image(28, 28, channels)
  for is_training in (True, False):
    [output] = _run('lenet', is_training, image, 28, 28)
    np.testing.assert_array_equal(output, (image.astype(np.float32) - 128.0) / 128.0)


def test_lenet_resizes_bilinearly():
  image = _random_image(8, 8, 1)
  [output] = _run('lenet', False, image, 28, 28)
  expected = (_bilinear_half_pixel(image, 28, 28) - 128.0) / 128.0
  np.testing.assert_allclose(output, expected, atol=1e-5)


def test_cifarnet_eval_equals_standardization():
  image = _random_image(32, 32, 3)
  [output] = _run('cifarnet', False, image, 32, 32)
  values = image.astype(np.float64)
  expected = (values - values.mean()) / max(values.std(), 1.0 / np.sqrt(values.size))
  np.testing.assert_allclose(output, expected, atol=1e-4)


def test_inception_eval_is_deterministic_and_scaled():
  # A constant image stays constant through crop and resize: 0 -> -1, 255 -> 1.
  for value, expected in ((0, -1.0), (255, 1.0)):
    [output] = _run('inception', False, np.full((40, 50, 3), value, np.uint8), 16, 16)
    np.testing.assert_allclose(output, expected, atol=1e-6)
  image = _random_image(40, 50, 3)
  first, second = _run('inception', False, image, 16, 16, runs=2)
  np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize('name', ['cifarnet', 'inception'])
def test_training_is_random(name):
  image = _random_image(32, 32, 3)
  outputs = _run(name, True, image, 32, 32, runs=4)
  assert any(not np.array_equal(outputs[0], other) for other in outputs[1:])


def test_bad_inputs_are_refused():
  preprocess = image_preprocessing.get_preprocessing('lenet', False)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='uint8 \\[H, W, C\\]'):
      preprocess(tf.zeros([8, 8, 1], tf.float32), 8, 8)
    with pytest.raises(ValueError, match='output_height=0'):
      preprocess(tf.zeros([8, 8, 1], tf.uint8), 0, 8)
