"""The clip pipeline's custom op: one window of each JPEG frame, decoded into the output.

`decode_windows` is tf.io.decode_jpeg (accurate integer DCT) of every frame of a clip cut
to one window, byte for byte, in one kernel: rows below the window skip the inverse DCT,
columns beside it are not transformed, no whole frame is ever stored and there is no
per-frame function (docs/benchmarks.md, issue 23). A frame decodes here exactly when it
decodes with TensorFlow's op; frames the op does not handle (another size than the first
frame, not JPEG bytes, CMYK) are flagged for TensorFlow's path (`clip_input`).

The library is built from ops/jpeg_windows.cc by `make jpeg-op` (which `make setup` runs)
and loaded when a graph first uses the op (`load`), not on import: a process that never
builds the clip pipeline (image training, a launcher, a CLI's flag check) runs without it.
A tf.data service data worker runs graphs it did not build, so it calls `load` at start-up.
"""

import os

from tf_compat import tf

__all__ = ['decode_windows', 'header_shape', 'load', 'is_built', 'DECODED', 'FAILED',
           'ELSEWHERE', 'LIBRARY_PATH']

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ops',
                            'jpeg_windows.so')
DECODED, FAILED, ELSEWHERE = 0, 1, 2  # the op's status of a frame


_ops = []  # The loaded library's module, once `load` has run.


def is_built():
  return os.path.exists(LIBRARY_PATH)


def load():
  """The op library's Python module, loaded (and the ops registered) on the first call.

  Raises:
    ImportError: the library is not built, in one line saying how to build it.
  """
  if not _ops:
    if not is_built():
      raise ImportError('%s is missing: build it with `make jpeg-op` in the repository root '
                        '(it needs g++ and libjpeg-turbo\'s headers: apt-get install g++ '
                        'libjpeg-dev)' % LIBRARY_PATH)
    _ops.append(tf.load_op_library(LIBRARY_PATH))
  return _ops[0]


def decode_windows(jpegs, frame_shape, offsets, size):
  """The window at `offsets` of every frame, and each frame's status.

  Args:
    jpegs: string [U] (rgb, 3 channels each) or [U, 2] (flow: grey u and v JPEGs).
    frame_shape: int32 [2], (height, width) of the frames; a frame of another size is
      ELSEWHERE.
    offsets: int32 [2], (y, x) of the window's top left, inside that frame shape.
    size: the window's height and width (a Python int).

  Returns:
    (uint8 [U, size, size, C], C = 3 for [U], 2 for [U, 2]: zeros where the status is
     not DECODED; int32 [U] status: DECODED, FAILED (tf.io.decode_jpeg fails too) or
     ELSEWHERE).
  """
  jpegs = tf.convert_to_tensor(jpegs, tf.string)
  channels = 3 if jpegs.shape.rank == 1 else 1
  windows, status = load().decode_jpeg_windows(
      jpegs, tf.cast(frame_shape, tf.int32), tf.cast(offsets, tf.int32), size=size,
      channels=channels)
  return windows, status


def header_shape(jpeg):
  """int32 [2] (height, width) from a JPEG's header (string []), (-1, -1) where none
  parses: never an error, unlike tf.io.extract_jpeg_shape."""
  return load().jpeg_header_shape(jpeg)
