"""Shared fixtures of the datasets tests: converted digits, a small class-folder tree."""

import io
import os
import types

import numpy as np
import pytest
from PIL import Image

from datasets.conversion import convert_images
from tests.once import made_once
from tf_compat import tf


@pytest.fixture(scope='session')
def digits_dir(tmp_path_factory):
  """Digits converted once per test run (about 4 s), 4 shards per split."""
  def make(output_dir):
    convert_images.convert('digits', output_dir, num_shards=4)
    return output_dir

  return made_once(tmp_path_factory, 'digits_4_shards', make)


def read_examples(file_pattern):
  """All tf.train.Examples of the files matching the pattern, files in sorted order."""
  examples = []
  for path in sorted(tf.io.gfile.glob(file_pattern)):
    for record in tf.io.tf_record_iterator(path):
      examples.append(tf.train.Example.FromString(record))
  return examples


def feature(example, key):
  """The single value of one feature of an Example."""
  value = example.features.feature[key]
  kind = value.WhichOneof('kind')
  return getattr(value, kind).value[0]


def pil_decode(encoded, mode):
  """Decodes image bytes with Pillow (independent of TensorFlow) -> uint8 numpy array."""
  with Image.open(io.BytesIO(encoded)) as image:
    return np.asarray(image.convert(mode))


def gradient_image(height, width, channels, offset=0):
  """A smooth uint8 [height, width, channels] image (JPEG keeps it nearly exact)."""
  rows = np.linspace(0, 200, height)[:, None, None]
  cols = np.linspace(0, 50, width)[None, :, None]
  chans = np.arange(channels)[None, None, :] * 10
  return np.clip(rows + cols + chans + offset, 0, 255).astype(np.uint8)


@pytest.fixture(scope='session')
def helpers():
  """The helper functions above, for test modules (conftest cannot be imported)."""
  return types.SimpleNamespace(read_examples=read_examples, feature=feature,
                               pil_decode=pil_decode, gradient_image=gradient_image)


def _save(array, path, image_format, mode=None):
  image = Image.fromarray(array.squeeze() if array.shape[-1] == 1 else array)
  if mode:
    image = image.convert(mode)
  image.save(path, format=image_format)


@pytest.fixture
def image_tree(tmp_path):
  """A class-folder tree: 3 classes, 10 readable images of distinct sizes, 3 bad files.

  Returns:
    (image_dir, {path: (label, height, width)} of the readable images, [bad paths]).
  """
  root = tmp_path / 'images'
  specs = {  # class: [(file name, height, width, format, mode)]
      'cat': [('a.jpg', 20, 30, 'JPEG', 'RGB'), ('b.png', 21, 31, 'PNG', 'RGB'),
              ('c.png', 22, 32, 'PNG', 'L'), ('d.jpg', 23, 33, 'JPEG', 'L')],
      'dog': [('e.png', 24, 34, 'PNG', 'RGBA'), ('f.bmp', 25, 35, 'BMP', 'RGB'),
              ('g.jpg', 26, 36, 'JPEG', 'RGB')],
      # GIF from grey: a dithered RGB palette would be noise that JPEG cannot keep.
      'zebra': [('h.jpg', 27, 37, 'JPEG', 'RGB'), ('i.png', 28, 38, 'PNG', 'RGB'),
                ('j.gif', 29, 39, 'GIF', 'L')],
  }
  good = {}
  for label, (class_name, files) in enumerate(sorted(specs.items())):
    os.makedirs(root / class_name)
    for offset, (name, height, width, image_format, mode) in enumerate(files):
      path = str(root / class_name / name)
      _save(gradient_image(height, width, 3, offset * 5), path, image_format, mode)
      good[path] = (label, height, width)
  truncated = root / 'dog' / 'broken.jpg'
  with open(str(root / 'cat' / 'a.jpg'), 'rb') as handle:
    truncated.write_bytes(handle.read()[:200])
  text = root / 'zebra' / 'notes.txt'
  text.write_text('not an image\n')
  stray = root / 'README.md'
  stray.write_text('top-level file, not in a class folder\n')
  (root / 'cat' / '.DS_Store').write_bytes(b'\0\0\0\1Bud1')  # hidden: ignored silently
  return str(root), good, [str(truncated), str(text), str(stray)]
