"""datasets/inputs/clip_decode.py: a window cut from each frame as TensorFlow decodes it,
through the one-kernel op and through TensorFlow's ops, failures flagged; finished clips
keep their static shape. The clips of whole pipelines: test_clip_input.py."""

import io

import numpy as np
import pytest
from PIL import Image

from datasets.inputs import clip_decode
from tf_compat import tf

CROP = 32


def test_finish_clips_keeps_the_static_shape():
  with tf.Graph().as_default():
    clips = tf.zeros([3, 8, CROP, CROP, 2], tf.uint8)
    finished = clip_decode.finish_clips(clips, 'flow', tf.constant([True, False, True]))
    assert finished.shape.as_list() == [3, 8, CROP, CROP, 2]
    assert finished.dtype == tf.float32


@pytest.mark.parametrize('modality', ['rgb', 'flow'])
def test_a_window_decoded_alone_is_the_whole_decode_cut_at_every_offset(modality):
  # Chroma-subsampled rgb (4:2:0, as the converter's frames), where a decoder that cut
  # first would read across a window's edge; flow frames are grey. Textured, odd-sized
  # frames, so windows start and end inside and on the 8- and 16-pixel block boundaries.
  rng = np.random.RandomState(7)
  height, width, size = 41, 53, 24
  smooth = np.kron(rng.randint(0, 256, (6, 7, 3)), np.ones((8, 8, 1)))[:height, :width]
  frame = np.clip(smooth + rng.randint(-40, 41, smooth.shape), 0, 255).astype(np.uint8)
  jpegs = []
  for image in ([frame] if modality == 'rgb' else [frame[..., 0], frame[..., 1]]):
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format='JPEG', quality=90, subsampling=2)
    jpegs.append(buffer.getvalue())
  offsets = tf.placeholder(tf.int32, [2])
  values = tf.constant([jpegs[0]] if modality == 'rgb' else [jpegs])
  window, decoded = clip_decode.decode_and_crop_frames(
      values, modality, size, lambda frame_height, frame_width: (offsets[0], offsets[1]))
  whole = tf.concat([tf.io.decode_jpeg(jpeg, dct_method='INTEGER_ACCURATE') for jpeg in jpegs],
                    axis=-1)
  with tf.Session() as sess:
    expected_frame = sess.run(whole)
    for y in range(height - size + 1):
      for x in range(width - size + 1):
        got, ok = sess.run([window, decoded], {offsets: [y, x]})
        assert ok.all()
        np.testing.assert_array_equal(got[0], expected_frame[y:y + size, x:x + size],
                                      err_msg='window at (%d, %d)' % (y, x))


def _textured_jpeg(height, width, seed, cut=None):
  """A 4:2:0 JPEG of 8x8 blocks of random levels plus noise; `cut`: only its first half."""
  rng = np.random.RandomState(seed)
  smooth = np.kron(rng.randint(0, 256, (height // 8 + 1, width // 8 + 1, 3)),
                   np.ones((8, 8, 1)))[:height, :width]
  frame = np.clip(smooth + rng.randint(-40, 41, smooth.shape), 0, 255).astype(np.uint8)
  buffer = io.BytesIO()
  Image.fromarray(frame).save(buffer, format='JPEG', quality=90, subsampling=2)
  data = buffer.getvalue()
  return data[:len(data) // 2] if cut else data


@pytest.mark.parametrize('first_other', [False, True])
def test_each_frame_is_cut_at_its_own_offsets_and_failures_are_flagged(first_other):
  # Frames of the first one's size go through the op, a clip with a frame of another size
  # or bytes that are not a JPEG through TensorFlow's ops: either way each frame is cut
  # where offsets_fn puts a window in a frame of its size, as TensorFlow decodes it.
  size = 24
  jpegs = [_textured_jpeg(40, 56, 0), _textured_jpeg(40, 56, 1, cut=True),
           _textured_jpeg(40, 56, 2)]
  if first_other:
    jpegs += [_textured_jpeg(48, 36, 3), b'not a jpeg']

  def offsets_fn(height, width):
    return (height - size) // 3, (width - size) * 2 // 3

  window, decoded = clip_decode.decode_and_crop_frames(tf.constant(jpegs), 'rgb', size,
                                                      offsets_fn)
  with tf.Session() as sess:
    got, ok = sess.run([window, decoded])
    expected_ok = []
    for jpeg, frame_window in zip(jpegs, got):
      try:
        frame = sess.run(tf.io.decode_jpeg(jpeg, dct_method='INTEGER_ACCURATE'))
      except tf.errors.InvalidArgumentError:
        expected_ok.append(False)
        assert not frame_window.any()
        continue
      expected_ok.append(True)
      y, x = offsets_fn(*frame.shape[:2])
      np.testing.assert_array_equal(frame_window, frame[y:y + size, x:x + size])
  assert list(ok) == expected_ok == [True, False, True] + [True, False] * first_other
