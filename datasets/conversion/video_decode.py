"""Decodes a video file into RGB frames with PyAV: optional short-side resize and frame rate.

    video = decode_video('v_ApplyEyeMakeup_g08_c01.avi', short_side=256, fps=25)
    video.frames        # uint8 [T, H, W, 3] RGB, H or W equal to 256
    video.frame_rate    # 25.0

Every failure, whatever FFmpeg said, is a `VideoDecodeError` whose `.reason` is one short
line, so a converter can skip the file and report why. No TensorFlow here: converters run
this in worker processes.

What counts as truncated. FFmpeg rarely raises on a cut-off file: an AVI cut in half (its
index is at the end) or an MP4 with the index in front decodes silently to fewer frames;
an MP4 with the index at the end (the usual layout) cannot be opened at all. So a file is
rejected when it cannot be opened, yields no frame, raises after some frames, or decodes to
clearly fewer frames than its container declares (see `_missing_frames_tolerated`).
Containers that declare no frame count (Matroska, WebM) cannot be checked for the last case.
"""

import dataclasses
import numbers
import os

import av
from av.video.reformatter import VideoReformatter
import cv2
import numpy as np

__all__ = ['VideoDecodeError', 'DecodedVideo', 'decode_video', 'resize_short_side']

# A source frame within this fraction of a source frame period after an output time still
# counts as "at or before" it: millisecond time bases (Matroska) round 29.97 fps timestamps
# by up to 0.5 ms, which must not flip which frame is picked.
_TIME_TOLERANCE = 0.05
# FFmpeg demuxers that render text files (ANSI, BIN, XBIN, ArtWorx, iCE draw) as video.
_TEXT_ART_FORMATS = ('tty', 'bin', 'xbin', 'adf', 'idf')


class VideoDecodeError(Exception):
  """A file that is not a decodable video; `.reason` says why in one short line."""

  def __init__(self, path, reason):
    super().__init__('%s: %s' % (path, reason))
    self.path = path
    self.reason = reason


@dataclasses.dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous: compare fields.
class DecodedVideo:
  """Decoded frames and where they came from.

  Attributes:
    frames: uint8 [T, H, W, 3] RGB, T >= 1.
    frame_rate: frames per second of `frames`: the requested fps, else the source's.
    source_frame_rate: frames per second the stream declares (average rate); 0.0 when it
      declares none.
    source_size: (height, width) of the source frames, before resizing.
  """
  frames: np.ndarray
  frame_rate: float
  source_frame_rate: float
  source_size: tuple


def resize_short_side(frame, short_side):
  """Resizes so the shorter side is `short_side`, keeping the aspect ratio (bilinear).

  The longer side is long * short_side / short rounded half up, e.g. 320x240 -> 341x256.

  Args:
    frame: uint8 [H, W, C] (C = 1 or 3) or [H, W].
    short_side: target length of the shorter side; None or 0 keeps the size.

  Returns:
    The resized frame, same dtype and channels; `frame` itself when the size is unchanged.
  """
  if not short_side:
    return frame
  height, width = frame.shape[:2]
  short, long = min(height, width), max(height, width)
  new_long = (2 * long * short_side + short) // (2 * short)
  new_height, new_width = ((short_side, new_long) if height <= width
                           else (new_long, short_side))
  if (new_height, new_width) == (height, width):
    return frame
  resized = cv2.resize(frame, (new_width, new_height), interpolation=cv2.INTER_LINEAR)
  return resized.reshape((new_height, new_width) + frame.shape[2:])


def decode_video(path, short_side=256, fps=None, max_frames=None, threads=0):
  """Decodes the first video stream of `path` into RGB frames.

  Frame rate: `fps=None` keeps every source frame. Otherwise output frame k stands for time
  k / fps (from the first frame) and is the last source frame whose presentation time is
  <= k / fps; so 25 -> 12.5 fps takes every other frame and 10 -> 20 fps shows each frame
  twice. The output covers the source duration, up to the end of its last frame (last time
  + 1 / source rate). Frames without timestamps are placed at index / source rate.

  Args:
    path: the video file.
    short_side: resize so the shorter side is this long (bilinear, aspect kept; see
      `resize_short_side`); None or 0 keeps the source size.
    fps: output frame rate; None keeps the source frames.
    max_frames: stop after this many output frames (None: the whole video). The
      declared-frame-count check is skipped then, since the end is never reached.
    threads: FFmpeg decoding threads; 0 lets FFmpeg choose.

  Returns:
    A DecodedVideo; frames are uint8 [T, H, W, 3] RGB, T >= 1.

  Raises:
    ValueError: a bad argument.
    VideoDecodeError: the file is missing, empty, not a video, has no video stream, is
      truncated or corrupt, or yields no frame.
  """
  _check_arguments(short_side, fps, max_frames, threads)
  path = os.fspath(path)
  _check_file(path)
  container = _open(path)
  try:
    stream, source_rate = _threaded_stream(path, container, threads, fps)
    sampler = _Sampler(fps, source_rate, short_side, max_frames)
    num_decoded, size = _decode_into(path, container, stream, sampler)
    num_declared = stream.frames  # 0 when the container does not say.
  finally:
    container.close()
  frames = sampler.finish()
  if max_frames is None or len(frames) < max_frames:
    _check_frame_count(path, num_decoded, num_declared)
  return DecodedVideo(frames=np.stack(frames), frame_rate=float(fps or source_rate),
                      source_frame_rate=float(source_rate), source_size=size)


def _check_arguments(short_side, fps, max_frames, threads):
  for name, value, low, none_ok in (('short_side', short_side, 0, True),
                                    ('max_frames', max_frames, 1, True),
                                    ('threads', threads, 0, False)):
    if value is None and none_ok:
      continue
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
      raise ValueError('%s=%r is not accepted: use an integer >= %d%s'
                       % (name, value, low, ' or None' if none_ok else ''))
  if fps is not None and (isinstance(fps, bool) or not isinstance(fps, numbers.Real)
                          or not 0 < fps < float('inf')):
    raise ValueError('fps=%r is not accepted: use a number > 0 or None' % (fps,))


def _check_file(path):
  """Rejects a missing, non-regular or empty file before FFmpeg sees it."""
  try:
    size = os.stat(path).st_size
  except FileNotFoundError:
    raise VideoDecodeError(path, 'no such file') from None
  except OSError as error:
    raise VideoDecodeError(path, 'cannot read: %s' % (error.strerror or error)) from None
  if os.path.isdir(path):
    raise VideoDecodeError(path, 'is a directory, not a file')
  if size == 0:
    raise VideoDecodeError(path, 'empty file (0 bytes)')


def _open(path):
  try:
    # Non-UTF-8 tags are common in old AVIs and must not make the file unreadable.
    return av.open(path, metadata_errors='ignore')
  except av.FFmpegError as error:
    container = _sniff_container(path)
    if container:
      raise VideoDecodeError(path, 'truncated or corrupt %s: cannot open it: %s'
                             % (container, _message(error))) from None
    raise VideoDecodeError(path, 'not a video: %s' % _message(error)) from None


def _sniff_container(path):
  """'MP4', 'AVI' or 'Matroska' when the file starts like one, else None.

  A cut-off MP4 whose index (moov) was at the end fails to open like random bytes do; its
  signature tells the user the file is damaged rather than of the wrong kind.
  """
  try:
    with open(path, 'rb') as handle:
      head = handle.read(12)
  except OSError:
    return None
  if head[4:8] == b'ftyp':
    return 'MP4'
  if head[:4] == b'RIFF' and head[8:12] == b'AVI ':
    return 'AVI'
  if head[:4] == b'\x1a\x45\xdf\xa3':
    return 'Matroska'
  return None


def _threaded_stream(path, container, threads, fps):
  """-> (the video stream set to decode with `threads` FFmpeg threads, its frame rate);
  VideoDecodeError when resampling to `fps` needs a rate the stream does not give."""
  stream = _video_stream(path, container)
  stream.thread_type = 'AUTO'  # frame + slice threading: frames still come out in order.
  stream.codec_context.thread_count = threads
  source_rate = _source_rate(stream)
  if fps is not None and not source_rate:
    raise VideoDecodeError(path, 'no frame rate in the stream; cannot resample to fps=%s'
                           % fps)
  return stream, source_rate


def _video_stream(path, container):
  """The first video stream, refusing files FFmpeg only renders as pictures."""
  kind = _picture_kind(container.format.name)
  if kind:
    raise VideoDecodeError(path, 'not a video: %s (%s)' % (kind, container.format.name))
  if not container.streams.video:
    kinds = sorted({stream.type for stream in container.streams})
    found = '%s only' % ', '.join(kinds) if kinds else 'no streams at all'
    raise VideoDecodeError(path, 'no video stream (%s)' % found)
  stream = container.streams.video[0]
  if stream.codec_context is None:  # PyAV's sign that FFmpeg has no decoder for the codec.
    raise VideoDecodeError(path, 'unsupported video codec: FFmpeg has no decoder for it')
  return stream


def _picture_kind(format_name):
  """'a still image' or 'text' for demuxers that turn such files into a video stream.

  FFmpeg opens a JPEG or PNG as a 1-frame video and renders a .txt file as ANSI art
  (the tty demuxer): neither belongs in a video dataset.
  """
  if format_name == 'image2' or format_name.endswith('_pipe'):
    return 'a still image'
  if format_name in _TEXT_ART_FORMATS:
    return 'text'
  return None


def _source_rate(stream):
  """Frames per second the stream declares; 0.0 when it declares none."""
  for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
    if rate:
      return float(rate)
  return 0.0


def _decode_into(path, container, stream, sampler):
  """Feeds every decoded frame to `sampler` until it is full.

  Returns:
    (number of source frames decoded, (height, width) of the source frames).
  """
  count, size = 0, None
  try:
    for frame in container.decode(stream):
      size = size or (frame.height, frame.width)
      if (frame.height, frame.width) != size:  # Rare (spliced streams); frames must stack.
        raise VideoDecodeError(path, 'frame size changes from %dx%d to %dx%d at frame %d'
                               % (size + (frame.height, frame.width, count)))
      count += 1
      if not sampler.add(frame, count - 1):
        break
  except av.FFmpegError as error:
    if count == 0:
      raise VideoDecodeError(path, 'no frames decoded: %s' % _message(error)) from None
    raise VideoDecodeError(path, 'truncated: decoding failed after %d frames: %s'
                           % (count, _message(error))) from None
  if count == 0:
    raise VideoDecodeError(path, 'no frames decoded')
  return count, size


def _check_frame_count(path, num_decoded, num_declared):
  if num_declared and not _missing_frames_tolerated(num_decoded, num_declared):
    raise VideoDecodeError(path, 'truncated: decoded %d of the %d frames the container '
                           'declares' % (num_decoded, num_declared))


def _missing_frames_tolerated(num_decoded, num_declared):
  """True when the shortfall is within what intact files show.

  Headers of intact files can count a frame or two the decoder never outputs (edit lists,
  XviD's packed B-frame placeholders); a cut-off file misses far more.
  """
  return num_declared - num_decoded <= max(2, num_declared // 100)


def _message(error):
  """FFmpeg's text without the errno and file name PyAV adds."""
  return getattr(error, 'strerror', None) or str(error) or type(error).__name__


class _Sampler:
  """Turns source frames, in presentation order, into the output frames.

  Converts to RGB and resizes only the frames that are output, once each. One reformatter
  serves the whole video: `frame.to_ndarray(format='rgb24')` gives the same pixels but sets
  up a new swscale context per frame, which costs more than decoding small frames.
  """

  def __init__(self, fps, source_rate, short_side, max_frames):
    self._fps = fps
    self._source_rate = source_rate
    self._short_side = short_side
    self._max_frames = max_frames
    self._frames = []          # output frames; repeats share one array
    self._last = None          # [av.VideoFrame, its RGB array or None]
    self._last_time = None     # seconds from the first frame
    self._first_pts = None
    self._reformatter = VideoReformatter()

  def add(self, frame, index):
    """Takes source frame `index`; returns False once no more frames are wanted."""
    time = self._time(frame, index)
    if self._fps is not None:
      self._emit_until(time)  # The previous frame covers every output time before this one.
    self._last, self._last_time = [frame, None], time
    if self._fps is None:
      self._emit_last()
    return not self._full()

  def finish(self):
    """The output frames: a list of uint8 [H, W, 3], at least one."""
    if self._fps is not None:
      self._emit_until(self._last_time + 1.0 / self._source_rate)
    return self._frames

  def _time(self, frame, index):
    """Presentation time in seconds from the first frame; never earlier than the last."""
    if self._first_pts is None and frame.pts is not None and index == 0:
      self._first_pts = frame.pts
    if frame.pts is not None and self._first_pts is not None and frame.time_base:
      time = float((frame.pts - self._first_pts) * frame.time_base)
    elif self._source_rate:
      time = index / self._source_rate
    else:
      time = float(index)  # Only reached with fps=None, where times are unused.
    return time if self._last_time is None else max(time, self._last_time)

  def _emit_until(self, time):
    """Outputs the last frame for every output time k / fps clearly before `time`."""
    tolerance = _TIME_TOLERANCE / self._source_rate
    while self._last is not None and not self._full() and (
        len(self._frames) / self._fps + tolerance < time):
      self._emit_last()

  def _emit_last(self):
    if self._full():
      return
    if self._last[1] is None:
      rgb = self._reformatter.reformat(self._last[0], format='rgb24').to_ndarray()
      self._last[1] = resize_short_side(rgb, self._short_side)
    self._frames.append(self._last[1])

  def _full(self):
    return self._max_frames is not None and len(self._frames) >= self._max_frames
