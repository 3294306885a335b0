"""The clip pipeline's custom op against TensorFlow's own decode: the same bytes, the same
failures.

The reference is tf.io.decode_jpeg (dct_method='INTEGER_ACCURATE', TensorFlow's bundled
libjpeg-turbo) sliced in NumPy: every window must equal it byte for byte, on Pillow's JPEGs
(4:2:0, 4:2:2 and 4:4:4 chroma, progressive, restart markers, grey) and on the converter's
frames, at offsets on and off the 8- and 16-pixel block bounds and at the frames' edges,
and a frame must fail in the op exactly when it fails there.
"""

import io

import numpy as np
import pytest
from PIL import Image

from datasets.inputs import jpeg_windows
from tests import video_testdata
from tf_compat import tf

# (height, width, Pillow's save options, window size); odd sizes put the frames' last
# blocks and the windows' edges off the block grid.
ENCODINGS = [
    (41, 53, dict(quality=90, subsampling=2), 24),   # 4:2:0, as the converter writes
    (48, 67, dict(quality=90, subsampling=1), 17),   # 4:2:2
    (40, 61, dict(quality=75, subsampling=0), 20),   # 4:4:4
    (57, 43, dict(quality=90, subsampling=2, progressive=True), 32),
    (50, 70, dict(quality=90, subsampling=2, restart_marker_blocks=1), 25),
]


def _textured(height, width, channels, seed):
  """uint8 [height, width, channels]: 8x8 blocks of random levels plus noise."""
  rng = np.random.RandomState(seed)
  blocks = rng.randint(0, 256, (height // 8 + 1, width // 8 + 1, channels))
  smooth = np.kron(blocks, np.ones((8, 8, 1)))[:height, :width]
  return np.clip(smooth + rng.randint(-40, 41, smooth.shape), 0, 255).astype(np.uint8)


def _jpeg(image, **options):
  buffer = io.BytesIO()
  Image.fromarray(image.squeeze()).save(buffer, format='JPEG', **options)
  return buffer.getvalue()


def _offsets(extent, size):
  """Window starts on every phase of a 16-pixel chroma block, and at both edges."""
  last = extent - size
  return sorted({o for o in list(range(18)) + [last - 1, last] if 0 <= o <= last})


def _decode_both(jpegs, size, offsets):
  """(op windows [N, U, size, size, C], op status [N, U], TensorFlow's whole frames) for
  each (y, x) of `offsets`, in one session run; jpegs string [U] or [U, G]."""
  values = tf.constant(jpegs)
  first = values[0] if values.shape.rank == 1 else values[0, 0]
  shape = jpeg_windows.header_shape(first)
  windows, status = tf.map_fn(
      lambda offset: jpeg_windows.decode_windows(values, shape, offset, size),
      tf.constant(offsets, tf.int32), fn_output_signature=(tf.uint8, tf.int32))
  channels = 3 if values.shape.rank == 1 else 1
  whole = tf.map_fn(
      lambda group: tf.concat([tf.io.decode_jpeg(group[g], channels=channels,
                                                 dct_method='INTEGER_ACCURATE')
                               for g in range(group.shape[0])], axis=-1),
      tf.reshape(values, [len(jpegs), -1]), fn_output_signature=tf.uint8)
  with tf.Session() as sess:
    return sess.run([windows, status, whole])


def _assert_windows_equal(jpegs, size):
  """The op's window at each offset of _offsets is TensorFlow's decode, cut."""
  first = jpegs[0] if isinstance(jpegs[0], bytes) else jpegs[0][0]
  with Image.open(io.BytesIO(first)) as image:
    width, height = image.size
  offsets = [(y, x) for y in _offsets(height, size) for x in _offsets(width, size)]
  windows, status, whole = _decode_both(jpegs, size, offsets)
  assert (status == jpeg_windows.DECODED).all()
  for (y, x), window in zip(offsets, windows):
    expected = whole[:, y:y + size, x:x + size]
    assert np.array_equal(window, expected), 'window at (%d, %d): max difference %d' % (
        y, x, np.abs(window.astype(int) - expected).max())


@pytest.mark.parametrize('height, width, options, size', ENCODINGS)
def test_rgb_windows_are_tensorflows_decode_cut(height, width, options, size):
  jpegs = [_jpeg(_textured(height, width, 3, seed), **options) for seed in (1, 2)]
  _assert_windows_equal(jpegs, size)


@pytest.mark.parametrize('height, width, options, size', ENCODINGS[:2])
def test_flow_windows_are_the_two_grey_decodes_cut(height, width, options, size):
  jpegs = [[_jpeg(_textured(height, width, 1, 2 * f + g), **options) for g in (0, 1)]
           for f in range(2)]
  _assert_windows_equal(jpegs, size)


@pytest.mark.parametrize('modality', ['rgb', 'flow'])
def test_the_converters_frames(tmp_path_factory, modality):
  directory = video_testdata.converted(tmp_path_factory, modality)
  video = next(iter(video_testdata.whole_videos(directory, 'train').values()))
  lists = video.feature_lists.feature_list
  keys = ['image/encoded'] if modality == 'rgb' else ['flow/u/encoded', 'flow/v/encoded']
  frames = [[lists[key].feature[i].bytes_list.value[0] for key in keys] for i in range(3)]
  _assert_windows_equal([f[0] for f in frames] if modality == 'rgb' else frames, 24)


def _decodes_in_tensorflow(jpeg):
  with tf.Session() as sess:
    try:
      sess.run(tf.io.decode_jpeg(jpeg, dct_method='INTEGER_ACCURATE'))
      return True
    except tf.errors.InvalidArgumentError:
      return False


def test_a_cut_jpeg_fails_exactly_where_tensorflows_decode_fails():
  # The window is the top left, so every cut below it would go unseen by a decoder that
  # stopped after the window's rows; TensorFlow reads on to the end of image.
  whole = _jpeg(_textured(48, 64, 3, 3), quality=90, subsampling=2)
  header_end = whole.index(b'\xff\xda') + 20
  lengths = [len(whole) - 1, len(whole) - 2, len(whole) - 3, len(whole) * 3 // 4,
             len(whole) // 2, header_end, 100]
  cut = [whole] + [whole[:length] for length in lengths]
  expected_ok = [_decodes_in_tensorflow(jpeg) for jpeg in cut]
  assert expected_ok[0] and not all(expected_ok)
  with tf.Session() as sess:
    windows, status = sess.run(jpeg_windows.decode_windows(cut, [48, 64], [0, 0], 16))
  assert list(status == jpeg_windows.DECODED) == expected_ok
  assert set(status) <= {jpeg_windows.DECODED, jpeg_windows.FAILED}
  assert not windows[status != jpeg_windows.DECODED].any()


def test_frames_the_op_leaves_to_tensorflow():
  frame = _textured(40, 48, 3, 4)
  png = io.BytesIO()
  Image.fromarray(frame).save(png, format='PNG')
  jpegs = [_jpeg(frame, quality=90), _jpeg(frame[:, :44], quality=90), png.getvalue(),
           b'garbage bytes', b'', _jpeg(frame, quality=90)]
  with tf.Session() as sess:
    windows, status, shapes = sess.run(
        jpeg_windows.decode_windows(jpegs, [40, 48], [3, 5], 32)
        + ([jpeg_windows.header_shape(jpeg) for jpeg in jpegs],))
  elsewhere = jpeg_windows.ELSEWHERE
  assert list(status) == [0, elsewhere, elsewhere, elsewhere, elsewhere, 0]
  assert not windows[1:5].any() and windows[0].any()
  assert [list(shape) for shape in shapes] == [[40, 48], [40, 44]] + [[-1, -1]] * 3 + [[40, 48]]


def test_a_window_outside_the_frames_is_an_error():
  jpeg = _jpeg(_textured(40, 48, 3, 5), quality=90)
  with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match='not inside'):
    sess.run(jpeg_windows.decode_windows([jpeg], [40, 48], [9, 0], 32))


def test_a_missing_library_names_the_command_that_builds_it(tmp_path, monkeypatch):
  # Loaded on first use, not on import: the first op built without the library raises.
  missing = str(tmp_path / 'none.so')
  monkeypatch.setattr(jpeg_windows, 'LIBRARY_PATH', missing)
  monkeypatch.setattr(jpeg_windows, '_ops', [])
  assert not jpeg_windows.is_built()
  with pytest.raises(ImportError) as raised:
    jpeg_windows.header_shape(tf.constant(b''))
  assert str(raised.value) == (
      '%s is missing: build it with `make jpeg-op` in the repository root (it needs g++ and '
      'libjpeg-turbo\'s headers: apt-get install g++ libjpeg-dev)' % missing)
