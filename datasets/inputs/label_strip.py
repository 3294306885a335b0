"""A clip montage's class, drawn above its frames: `3: ApplyEyeMakeup`.

TensorBoard shows an image summary's tag and nothing per image, and a tag is fixed when the
graph is built, while each montage is of another clip; a text summary would sit in another
tab. So the class is drawn into the image, where the frames are looked at. The texts are
known at graph build (labels.txt's names, else the index); the graph only gathers them.

Glyphs are Pillow's built-in bitmap font (6 x 11 pixels, every printable ASCII character
the same width), rendered once into an atlas: a strip is the atlas gathered by the
characters of its label's text. Other characters are drawn as '?'.
"""

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tf_compat import tf

__all__ = ['GLYPH_HEIGHT', 'GLYPH_WIDTH', 'label_texts', 'with_labels']

GLYPH_HEIGHT, GLYPH_WIDTH = 11, 6
_FIRST, _LAST = 32, 126          # printable ASCII: ' ' .. '~'


@functools.lru_cache(maxsize=1)
def _atlas():
  """uint8 [95, GLYPH_HEIGHT, GLYPH_WIDTH]: each printable character, white on black."""
  font = ImageFont.load_default_imagefont()
  glyphs = []
  for code in range(_FIRST, _LAST + 1):
    image = Image.new('L', (GLYPH_WIDTH, GLYPH_HEIGHT))
    ImageDraw.Draw(image).text((0, 0), chr(code), fill=255, font=font)
    glyphs.append(np.asarray(image))
  return np.stack(glyphs)


def label_texts(labels_to_names, num_classes, labels_offset=0):
  """The text of each model class k (a label after --labels_offset): 'k: <name>' with the
  name of dataset label k + labels_offset, or 'k' when labels.txt names none."""
  texts = []
  for label in range(num_classes):
    name = labels_to_names.get(label + labels_offset)
    texts.append('%d: %s' % (label, name) if name else '%d' % label)
  return texts


def _strips(texts):
  """uint8 [len(texts), GLYPH_HEIGHT, longest * GLYPH_WIDTH]: each text drawn, its glyphs
  side by side, space-padded to the longest (NumPy, when the graph is built)."""
  longest = max(len(text) for text in texts)
  codes = np.asarray([[ord(c) - _FIRST if _FIRST <= ord(c) <= _LAST else ord('?') - _FIRST
                       for c in text.ljust(longest)] for text in texts], np.int64)
  glyphs = _atlas()[codes]                                    # [N, L, h, w]
  return np.ascontiguousarray(glyphs.transpose(0, 2, 1, 3)).reshape(
      len(texts), GLYPH_HEIGHT, longest * GLYPH_WIDTH)


def with_labels(montages, labels, texts):
  """Montages uint8 [B, H, W, 3] and labels int [B] -> uint8 [B, GLYPH_HEIGHT + H, W, 3]:
  each montage under a black strip with its label's text (from `texts`, one per label)
  from the left edge, cut at W.

  The strips are drawn in NumPy and the graph only gathers one per label: a uint8
  Transpose in the graph made oneDNN's layout pass print an ERROR line ("oneDNN supports
  DT_UINT8 only on platforms with AVX-512") in every video run, on any CPU, for a 3 KB
  transpose that TensorFlow's own kernel did anyway."""
  strips = tf.gather(tf.constant(_strips(texts)), tf.cast(labels, tf.int32))  # [B, h, L*w]
  width = tf.shape(montages)[2]
  strips = tf.pad(strips, [[0, 0], [0, 0], [0, tf.maximum(0, width - tf.shape(strips)[2])]])
  strips = tf.tile(strips[:, :, :width, tf.newaxis], [1, 1, 1, 3])
  return tf.concat([strips, montages], axis=1)
