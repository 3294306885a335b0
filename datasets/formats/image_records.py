"""slim's image record format: one `tf.train.Example` per image.

Keys: `image/encoded` (PNG or JPEG bytes), `image/format` (b'png' or b'jpeg'),
`image/class/label` (int64), `image/height`, `image/width`, `image/channels` (int64).
"""

from tf_compat import tf

IMAGE_FORMATS = (b'png', b'jpeg')


def _bytes_feature(value):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64_feature(value):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def image_to_example(encoded_bytes, image_format, label, height, width, channels):
  """Builds the record of one encoded image (pure protobuf, no graph).

  Args:
    encoded_bytes: the PNG or JPEG file contents.
    image_format: b'png' or b'jpeg' (str accepted).
    label: int class index.
    height, width, channels: the decoded image's size, recorded for readers that want it
      without decoding.

  Returns:
    A tf.train.Example.
  """
  if isinstance(image_format, str):
    image_format = image_format.encode('ascii')
  if image_format not in IMAGE_FORMATS:
    raise ValueError('image_format %r is not accepted: use one of %s'
                     % (image_format, ', '.join(repr(f) for f in IMAGE_FORMATS)))
  return tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': _bytes_feature(encoded_bytes),
      'image/format': _bytes_feature(image_format),
      'image/class/label': _int64_feature(label),
      'image/height': _int64_feature(height),
      'image/width': _int64_feature(width),
      'image/channels': _int64_feature(channels),
  }))


def _features():
  return {
      'image/encoded': tf.io.FixedLenFeature([], tf.string),
      'image/format': tf.io.FixedLenFeature([], tf.string, default_value=b'png'),
      'image/class/label': tf.io.FixedLenFeature([], tf.int64),
  }


def parse_encoded_example(serialized):
  """Parses one record without decoding it (graph ops): (encoded bytes string scalar,
  label int64 scalar)."""
  parsed = tf.io.parse_single_example(serialized, _features())
  return parsed['image/encoded'], parsed['image/class/label']


def decode_image(encoded, num_channels):
  """uint8 [H, W, num_channels] of PNG or JPEG bytes (graph ops; H, W dynamic)."""
  # decode_image sniffs the bytes, so the format key is informational only.
  image = tf.io.decode_image(encoded, channels=num_channels, dtype=tf.uint8,
                             expand_animations=False)
  image.set_shape([None, None, num_channels])
  return image


def parse_image_example(serialized, num_channels):
  """Parses and decodes one record (graph ops).

  Args:
    serialized: string scalar tensor, one serialized tf.train.Example.
    num_channels: 1 or 3; every image is decoded to this many channels (grey <-> RGB).

  Returns:
    (image uint8 [H, W, num_channels], label int64 scalar). H and W are dynamic.
  """
  encoded, label = parse_encoded_example(serialized)
  return decode_image(encoded, num_channels), label
