"""Image preprocessing chosen by name (slim's preprocessing_factory).

    preprocess = image_preprocessing.get_preprocessing('lenet', is_training=True)
    image = preprocess(image, 28, 28)   # uint8 [H, W, C] -> float32 [28, 28, C]

Every function takes a uint8 [H, W, C] image with a static channel count (1 or 3) and
returns float32 [output_height, output_width, C]. Resizing is bilinear with half-pixel
centres (TF 2 `tf.image.resize`).
"""

import dataclasses
from typing import Callable

from tf_compat import tf

_CIFARNET_PADDING = 4
_INCEPTION_CENTRAL_FRACTION = 0.875
_INCEPTION_AREA_RANGE = (0.08, 1.0)
_INCEPTION_ASPECT_RATIO_RANGE = (3. / 4., 4. / 3.)


def _resize(image, height, width):
  """float [H, W, C] -> float [height, width, C]; returned unchanged if already that size."""
  if image.shape.as_list()[:2] == [height, width]:
    return image
  shape = tf.shape(image)
  same_size = tf.logical_and(tf.equal(shape[0], height), tf.equal(shape[1], width))
  # tf.cond keeps same-size images bit-exact instead of trusting the resampler to be.
  return tf.cond(same_size, lambda: image,
                 lambda: tf.compat.v2.image.resize(image, [height, width], method='bilinear'))


def _scale_lenet(image):
  """uint8-valued float -> [-1, 127/128], slim's (x - 128) / 128."""
  return (image - 128.0) / 128.0


def lenet_preprocess(image, output_height, output_width):
  """Resize and scale to [-1, 1); identical for training and evaluation."""
  return _scale_lenet(_resize(tf.cast(image, tf.float32), output_height, output_width))


def cifarnet_train(image, output_height, output_width):
  """Resize, pad 4 and random-crop back, random flip, brightness and contrast, standardize."""
  channels = image.shape.as_list()[-1]
  image = _resize(tf.cast(image, tf.float32), output_height, output_width)
  pad = _CIFARNET_PADDING
  image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
  image = tf.image.random_crop(image, [output_height, output_width, channels])
  image = tf.image.random_flip_left_right(image)
  # slim's ranges, on 0..255 values; standardization below undoes the overall scale.
  image = tf.image.random_brightness(image, max_delta=63)
  image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
  return tf.image.per_image_standardization(image)


def cifarnet_eval(image, output_height, output_width):
  """Resize, then per-image standardization (mean 0, std 1)."""
  image = _resize(tf.cast(image, tf.float32), output_height, output_width)
  return tf.image.per_image_standardization(image)


def _scale_inception(image):
  """[0, 1] -> [-1, 1]."""
  return (image - 0.5) * 2.0


def inception_train(image, output_height, output_width):
  """Random crop of 8%..100% of the area (aspect 3/4..4/3), resize, random flip, [-1, 1]."""
  image = tf.image.convert_image_dtype(image, tf.float32)
  whole_image = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
  begin, size, _ = tf.image.sample_distorted_bounding_box(
      tf.shape(image), bounding_boxes=whole_image,
      min_object_covered=_INCEPTION_AREA_RANGE[0],
      aspect_ratio_range=_INCEPTION_ASPECT_RATIO_RANGE, area_range=_INCEPTION_AREA_RANGE,
      max_attempts=100, use_image_if_no_bounding_boxes=True)
  image = tf.slice(image, begin, size)
  image = tf.compat.v2.image.resize(image, [output_height, output_width], method='bilinear')
  image = tf.image.random_flip_left_right(image)
  return _scale_inception(image)


def inception_eval(image, output_height, output_width):
  """Central crop of 87.5%, resize, [-1, 1]."""
  image = tf.image.convert_image_dtype(image, tf.float32)
  image = tf.image.central_crop(image, central_fraction=_INCEPTION_CENTRAL_FRACTION)
  image = tf.compat.v2.image.resize(image, [output_height, output_width], method='bilinear')
  return _scale_inception(image)


@dataclasses.dataclass(frozen=True)
class PreprocessingEntry:
  """One preprocessing name: its training and its evaluation function."""
  name: str
  train_fn: Callable
  eval_fn: Callable


_REGISTRY = {}


def register_preprocessing(name, train_fn, eval_fn):
  """Adds a preprocessing name; a name registered twice raises ValueError."""
  if name in _REGISTRY:
    raise ValueError('preprocessing %r is already registered' % name)
  _REGISTRY[name] = PreprocessingEntry(name=name, train_fn=train_fn, eval_fn=eval_fn)


def list_preprocessing():
  """Returns the registered preprocessing names, sorted."""
  return sorted(_REGISTRY)


def _check_input(image, output_height, output_width):
  for label, value in (('output_height', output_height), ('output_width', output_width)):
    if not isinstance(value, int) or value < 1:
      raise ValueError('%s=%r is not accepted: use a positive integer' % (label, value))
  if image.dtype != tf.uint8 or image.shape.rank != 3 or image.shape.as_list()[-1] is None:
    raise ValueError('preprocessing takes a uint8 [H, W, C] image with a known C, got %s %s'
                     % (image.dtype.name, image.shape))


def get_preprocessing(name, is_training):
  """Returns fn(image uint8 [H, W, C], output_height, output_width) -> float32 [h, w, C].

  Raises:
    ValueError: unknown name (the message lists the valid names).
  """
  if name not in _REGISTRY:
    raise ValueError('preprocessing_name %r is not known; valid names: %s'
                     % (name, ', '.join(list_preprocessing())))
  entry = _REGISTRY[name]
  function = entry.train_fn if is_training else entry.eval_fn

  def preprocess(image, output_height, output_width):
    _check_input(image, output_height, output_width)
    channels = image.shape.as_list()[-1]
    image = function(image, output_height, output_width)
    image.set_shape([output_height, output_width, channels])
    return image

  return preprocess


register_preprocessing('lenet', lenet_preprocess, lenet_preprocess)
register_preprocessing('cifarnet', cifarnet_train, cifarnet_eval)
register_preprocessing('inception', inception_train, inception_eval)
