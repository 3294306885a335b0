"""Per-video work of the converter: frames in, JPEG bytes out. No TensorFlow here.

Runs inside converter worker processes (`datasets.conversion.timed_pool`), so it imports only PyAV
(through `video_decode`), OpenCV, Pillow and NumPy: a spawned worker starts in well under
a second instead of paying for a TensorFlow import.

Two sources:
  * a video file: decoded with PyAV, short side resized, optionally resampled in time;
    rgb frames are JPEG-encoded, flow is TV-L1 optical flow between consecutive grey
    frames (OpenCV contrib), clipped to +-20 px and stored as two grey JPEGs per frame.
  * an extracted frame folder (`jpegs_256/<video>/frame000001.jpg`, or for flow
    `tvl1_flow/u/<video>/...` and `tvl1_flow/v/<video>/...`): the JPEG bytes are kept as
    they are (no decode, no re-encode), so users' prepared data is reused unchanged.
"""

import dataclasses
import os
import re

import numpy as np

from datasets.formats.flow_encoding import flow_to_uint8  # NumPy only, like this module

__all__ = ['BadVideo', 'VideoTask', 'tvl1_flow', 'encode_jpeg', 'process_video']


@dataclasses.dataclass(frozen=True)
class VideoTask:
  """What one worker call converts. `source` is a video path or a frame-folder root."""
  source: str
  video_id: str
  modality: str            # 'rgb' or 'flow'
  short_side: int = 256    # 0 keeps the decoded size
  fps: float = 0.0         # 0 keeps the source frame rate
  jpeg_quality: int = 90
  from_frames: bool = False


def encode_jpeg(image, quality):
  """uint8 [H, W, 3] RGB or [H, W] grey -> JPEG bytes."""
  import cv2  # pylint: disable=import-outside-toplevel
  if image.ndim == 3:
    image = image[:, :, ::-1]  # OpenCV encodes BGR.
  ok, data = cv2.imencode('.jpg', np.ascontiguousarray(image),
                          [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
  if not ok:
    raise ValueError('JPEG encoding failed for an image of shape %s' % (image.shape,))
  return data.tobytes()


def tvl1_flow(frames):
  """TV-L1 flow between consecutive frames.

  Args:
    frames: uint8 [T, H, W, 3] RGB.

  Returns:
    float32 [max(T - 1, 1), H, W, 2] (u, v) in pixels per frame; a one-frame video
    has no motion and gets one all-zero flow frame.
  """
  import cv2  # pylint: disable=import-outside-toplevel
  grey = [cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY) for frame in frames]
  if len(grey) == 1:
    return np.zeros((1,) + grey[0].shape + (2,), np.float32)
  solver = cv2.optflow.DualTVL1OpticalFlow_create()
  return np.stack([solver.calc(a, b, None) for a, b in zip(grey[:-1], grey[1:])])


def _video_frames(task):
  from datasets.conversion import video_decode  # pylint: disable=import-outside-toplevel
  # One decoder thread: the converter already runs one worker process per core, and
  # PyAV's automatic threading was about 2x slower on small videos.
  decoded = video_decode.decode_video(task.source, short_side=task.short_side or None,
                                      fps=task.fps or None, threads=1)
  frames = decoded.frames
  if task.modality == 'rgb':
    jpegs = [encode_jpeg(frame, task.jpeg_quality) for frame in frames]
  else:
    flow = flow_to_uint8(tvl1_flow(frames))
    jpegs = [(encode_jpeg(f[:, :, 0], task.jpeg_quality),
              encode_jpeg(f[:, :, 1], task.jpeg_quality)) for f in flow]
  height, width = frames.shape[1:3]
  return {'frames': jpegs, 'height': int(height), 'width': int(width),
          'frame_rate': float(decoded.frame_rate)}


_FRAME_FILE = re.compile(r'^frame(\d+)\.jpe?g$', re.IGNORECASE)


def _sorted_frame_files(folder):
  if not os.path.isdir(folder):
    raise FileNotFoundError('frame folder missing: %s' % folder)
  names = [n for n in os.listdir(folder) if _FRAME_FILE.match(n)]
  if not names:
    raise ValueError('no frameNNNNNN.jpg files in %s' % folder)
  return [os.path.join(folder, n)
          for n in sorted(names, key=lambda n: int(_FRAME_FILE.match(n).group(1)))]


def _read_bytes(path):
  with open(path, 'rb') as handle:
    return handle.read()


def _folder_frames(task):
  """Imports extracted JPEGs as they are; size read from the first frame's header."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  if task.modality == 'rgb':
    files = _sorted_frame_files(os.path.join(task.source, task.video_id))
    jpegs = [_read_bytes(f) for f in files]
  else:
    u_files = _sorted_frame_files(os.path.join(task.source, 'u', task.video_id))
    v_files = _sorted_frame_files(os.path.join(task.source, 'v', task.video_id))
    if len(u_files) != len(v_files):
      raise ValueError('flow u has %d frames but v has %d' % (len(u_files), len(v_files)))
    files = u_files
    jpegs = [(_read_bytes(u), _read_bytes(v)) for u, v in zip(u_files, v_files)]
  with Image.open(files[0]) as first:
    width, height = first.size
  return {'frames': jpegs, 'height': int(height), 'width': int(width),
          'frame_rate': float(task.fps or 25.0)}


class BadVideo(Exception):
  """The video cannot be converted; str() is the one-line reason for the manifest."""


def process_video(task):
  """Converts one video; raises BadVideo with a reason on bad input."""
  from datasets.conversion.video_decode import VideoDecodeError  # pylint: disable=import-outside-toplevel
  try:
    return _folder_frames(task) if task.from_frames else _video_frames(task)
  except VideoDecodeError as error:
    raise BadVideo(error.reason) from None
  except (OSError, ValueError) as error:
    raise BadVideo(str(error)) from None
