"""The class drawn above a clip montage (datasets/inputs/label_strip.py), read back from
the pixels with glyphs Pillow draws here, one character at a time."""

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from datasets.inputs import label_strip
from tf_compat import tf

HEIGHT, WIDTH = 11, 6   # Pillow's built-in bitmap font: every printable character 6 x 11


def _glyphs():
  font = ImageFont.load_default_imagefont()
  glyphs = {}
  for code in range(126, 31, -1):  # ' ' last, so a blank cell reads as a space
    image = Image.new('L', (WIDTH, HEIGHT))
    ImageDraw.Draw(image).text((0, 0), chr(code), fill=255, font=font)
    glyphs[np.asarray(image).tobytes()] = chr(code)
  return glyphs


_GLYPHS = _glyphs()


def read_label(image):
  """The text of an image's label strip (its top HEIGHT rows), as an array [H, W, 3]:
  each 6-pixel cell is the glyph it equals; trailing blanks dropped; '#' for a cell that
  is no glyph (a cut one)."""
  strip = np.asarray(image)[:HEIGHT]
  assert (strip[..., 0] == strip[..., 1]).all() and (strip[..., 0] == strip[..., 2]).all()
  cells = [strip[:, x:x + WIDTH, 0] for x in range(0, strip.shape[1] - WIDTH + 1, WIDTH)]
  return ''.join(_GLYPHS.get(np.ascontiguousarray(cell).tobytes(), '#')
                 for cell in cells).rstrip()


def test_each_class_reads_by_name_or_by_index():
  names = {0: 'archery', 1: 'bowling', 2: 'diving'}
  assert label_strip.label_texts(names, 3) == ['0: archery', '1: bowling', '2: diving']
  # --labels_offset=1: model class k is dataset label k + 1; a label without a name.
  assert label_strip.label_texts({1: 'bowling'}, 2, labels_offset=1) == ['0: bowling', '1']


def test_strips_sit_above_the_montages_and_are_cut_at_their_width():
  montages = np.random.RandomState(0).randint(0, 256, (3, 5, 40, 3)).astype(np.uint8)
  texts = ['0: archery', '1: Ωmega', '2']
  with tf.Graph().as_default(), tf.Session() as sess:
    labelled = sess.run(label_strip.with_labels(tf.constant(montages),
                                                tf.constant([1, 2, 0]), texts))
  assert labelled.shape == (3, HEIGHT + 5, 40, 3)
  np.testing.assert_array_equal(labelled[:, HEIGHT:], montages)
  # 40 pixels hold 6 whole characters, and 4 columns of a seventh.
  assert [read_label(image[:, :36]) for image in labelled] == ['1: ?me', '2', '0: arc']
  assert (labelled[1, :HEIGHT, 6:] == 0).all()
