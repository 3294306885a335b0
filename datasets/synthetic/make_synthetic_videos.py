"""Writes a tiny synthetic action dataset: real video files and split lists, UCF101 layout.

The work of `python -m datasets.make_synthetic_videos` (`SyntheticVideosConfig` holds its
flags, `write_synthetic_videos(config)` runs it); `make_synthetic_videos(output_dir,
**settings)` takes the settings as keywords: the fields of `SyntheticVideoSettings`.

Default: 4 classes x 12 videos of 8-40 frames; about 1 s on one CPU core and 3 MB.
Output (as UCF101 unpacked, with the `ucfTrainTestlist` files in splits/):

    <output_dir>/videos/<ClassName>/v_<ClassName>_gGG_cCC.avi
    <output_dir>/splits/classInd.txt      "1 MoveDown" (1-based, classes sorted by name)
    <output_dir>/splits/trainlist01.txt   "MoveDown/v_MoveDown_g02_c01.avi 1"
    <output_dir>/splits/testlist01.txt    "MoveDown/v_MoveDown_g01_c01.avi"

Lines end with CRLF like the real lists. Groups play UCF101's role (one group = one actor
and scene): the clips of a group share the objects' textures, and the first groups of every
class are the test split, so train and test groups are disjoint.

What the videos show. The same scene in every class: two squares with random blocky colour
textures, half a frame apart, at a uniformly random start position, moving together at 2-4
pixels per frame over grey noise that changes every frame. Only the direction differs
between classes (right, left, down, up; then diagonals for more classes). Positions wrap
around the frame edges, so the squares' position is uniform in every frame: one frame
carries no label information and a classifier must use motion.

Files are MPEG-4 Part 2 in AVI, the codec family and container of UCF101 itself (XviD),
encoded single-threaded so the bytes depend only on the seed and the PyAV version.
"""

import collections
import dataclasses
import fractions
import math
import os
from typing import Optional

import av
import cv2
import numpy as np

from core.params import ConfigError, param

__all__ = ['DIRECTIONS', 'SyntheticVideoSettings', 'SyntheticVideosConfig',
           'write_synthetic_videos', 'make_synthetic_videos', 'summary_line']

# Class name -> unit (dy, dx) per frame, image axes (y down). Classes use the first n.
_DIAGONAL = 1 / math.sqrt(2)
DIRECTIONS = (
    ('MoveRight', (0.0, 1.0)), ('MoveLeft', (0.0, -1.0)),
    ('MoveDown', (1.0, 0.0)), ('MoveUp', (-1.0, 0.0)),
    ('MoveDownRight', (_DIAGONAL, _DIAGONAL)), ('MoveUpLeft', (-_DIAGONAL, -_DIAGONAL)),
    ('MoveDownLeft', (_DIAGONAL, -_DIAGONAL)), ('MoveUpRight', (-_DIAGONAL, _DIAGONAL)),
)
# (PyAV encoder, file extension), first available wins: MPEG-4 Part 2 in AVI is what UCF101
# uses and every FFmpeg build has it; libx264 is optional (GPL) in FFmpeg builds.
_ENCODERS = (('mpeg4', '.avi'), ('libx264', '.mp4'))
_CLIPS_PER_GROUP = 3
_SPEED_RANGE = (2.0, 4.0)      # pixels per frame at the stored size
_OBJECT_FRACTION = 0.5         # object side / shorter frame side
_TEXTURE_CELLS = 6             # texture blocks per object side: coarse enough to survive coding
_NOISE_MEAN, _NOISE_STD = 128.0, 20.0
_MIN_SIDE = 16


def _valid_size(size):
  """True for a (height, width) pair of even integers >= _MIN_SIDE (yuv420p halves both)."""
  return len(size) == 2 and all(
      not isinstance(side, bool) and isinstance(side, (int, np.integer)) and side >= _MIN_SIDE
      and side % 2 == 0 for side in size)


def _check_int(name, value, low, high):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
      low <= value <= high):
    raise ConfigError('%s=%r is not accepted: use an integer from %d to %d'
                     % (name, value, low, high))


@dataclasses.dataclass(frozen=True)
class SyntheticVideoSettings:
  """What the videos are; checked when made (ConfigError naming the first bad field).

  Attributes:
    num_classes: 2 to 8 motion directions.
    videos_per_class: at least 4 (two groups, so that train and test can be disjoint).
    min_frames, max_frames: lengths are uniform in [min_frames, max_frames]; in every class
      the first video has min_frames and the last max_frames, so both extremes occur.
    sizes: (height, width) pairs, even, at least 16; each video picks one at random.
    fps: frame rate written into the files.
    test_fraction: share of each class's groups (rounded, at least one) held out for test.
    seed: everything (lengths, sizes, textures, motion, noise) follows from it.
  """
  num_classes: int = 4
  videos_per_class: int = 12
  min_frames: int = 8
  max_frames: int = 40
  sizes: tuple[tuple[int, int], ...] = ((64, 80), (72, 96))
  fps: float = 25.0
  test_fraction: float = 0.25
  seed: int = 0

  def __post_init__(self):
    object.__setattr__(self, 'sizes', tuple(tuple(size) for size in self.sizes))
    _check_int('num_classes', self.num_classes, 2, len(DIRECTIONS))
    # At least two groups, so train and test can be disjoint; gGG has two digits.
    _check_int('videos_per_class', self.videos_per_class, _CLIPS_PER_GROUP + 1,
               99 * _CLIPS_PER_GROUP)
    _check_int('min_frames', self.min_frames, 1, 100000)
    _check_int('max_frames', self.max_frames, self.min_frames, 100000)
    if not self.sizes or not all(_valid_size(size) for size in self.sizes):
      raise ConfigError('sizes=%r is not accepted: use (height, width) pairs of even '
                        'integers >= %d' % (self.sizes, _MIN_SIDE))
    fps = self.fps
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 1 <= fps <= 1000:
      raise ConfigError('fps=%r is not accepted: use a number from 1 to 1000' % (fps,))
    fraction = self.test_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (
        0 < fraction < 1):
      raise ConfigError('test_fraction=%r is not accepted: use a number between 0 and 1'
                        % (fraction,))


_DEFAULT = SyntheticVideoSettings()


@dataclasses.dataclass(frozen=True)
class SyntheticVideosConfig:
  """What to write; each field is also a flag of `python -m datasets.make_synthetic_videos`
  (defaults from SyntheticVideoSettings)."""
  # Output.
  output_dir: Optional[str] = param(None, 'Directory for videos/ and splits/ (new or empty).')
  seed: int = param(_DEFAULT.seed, 'Seed of everything random.')
  # Classes.
  num_classes: int = param(_DEFAULT.num_classes, 'Motion directions, 2 to %d.'
                           % len(DIRECTIONS))
  videos_per_class: int = param(_DEFAULT.videos_per_class,
                                'Videos per class, in groups of %d clips.' % _CLIPS_PER_GROUP)
  test_fraction: float = param(_DEFAULT.test_fraction,
                               'Share of each class\'s groups held out for test.')
  # Videos.
  min_frames: int = param(_DEFAULT.min_frames, 'Shortest video, in frames.')
  max_frames: int = param(_DEFAULT.max_frames, 'Longest video, in frames.')
  sizes: tuple[str, ...] = param(tuple('%dx%d' % size for size in _DEFAULT.sizes),
                                 'Frame sizes HEIGHTxWIDTH (even); each video picks one.')
  fps: float = param(_DEFAULT.fps, 'Frame rate of the files.')


def write_synthetic_videos(config):
  """Writes the dataset a SyntheticVideosConfig describes; see make_synthetic_videos.

  Raises:
    ConfigError: a bad setting (--sizes not HEIGHTxWIDTH pairs included) or an occupied
      output_dir; nothing is written then.
    OSError, av.FFmpegError: writing failed.
  """
  return make_synthetic_videos(
      config.output_dir, num_classes=config.num_classes,
      videos_per_class=config.videos_per_class, min_frames=config.min_frames,
      max_frames=config.max_frames, sizes=_parse_sizes(config.sizes), fps=config.fps,
      test_fraction=config.test_fraction, seed=config.seed)


def _parse_sizes(values):
  """('64x80', ...) -> ((64, 80), ...); ConfigError naming the flag."""
  try:
    return tuple(tuple(int(side) for side in value.lower().split('x', 1)) for value in values)
  except ValueError:
    raise ConfigError('--sizes=%s is not accepted: use HEIGHTxWIDTH pairs like 64x80,72x96'
                      % ','.join(values)) from None


def summary_line(summary):
  """One line saying what make_synthetic_videos wrote (its returned dict)."""
  return ('wrote %d train and %d test videos of %d classes (%s in %s) into %s'
          % (summary['num_train'], summary['num_test'], len(summary['class_names']),
             summary['codec'], summary['extension'], summary['output_dir']))


@dataclasses.dataclass(frozen=True)
class _Video:
  """One planned video: where it goes and what it shows."""
  class_name: str
  label: int                 # 0-based index into the sorted class names
  group: int                 # 1-based, as in gGG
  clip: int                  # 1-based, as in cCC
  split: str                 # 'train' or 'test'
  num_frames: int
  height: int
  width: int
  direction: tuple           # unit (dy, dx)
  speed: float               # pixels per frame
  start: tuple               # (y, x) of the first object's top-left corner in frame 0
  texture_seed: int          # shared by the clips of a group
  noise_seed: int


def make_synthetic_videos(output_dir, **settings):
  """Writes the videos and split lists (see the module docstring) into `output_dir`.

  Args:
    output_dir: created if missing; must not already hold videos/ or splits/.
    **settings: fields of SyntheticVideoSettings (their defaults and rules there).

  Returns:
    A dict: output_dir, video_dir, split_dir, class_names (sorted; label i is
    class_names[i], written as i + 1 in the lists), codec, extension, fps, num_train,
    num_test and videos: one dict per video with path (relative to video_dir), class_name,
    label, group, clip, split, num_frames, height, width, direction (dy, dx), speed.

  Raises:
    ConfigError (a ValueError): a bad argument or an occupied output_dir; nothing is
      written then.
  """
  _check_output_dir(output_dir)
  settings = SyntheticVideoSettings(**settings)
  codec, extension = _pick_encoder()
  videos = _plan(settings)
  video_dir = os.path.join(output_dir, 'videos')
  split_dir = os.path.join(output_dir, 'splits')
  for video in videos:
    _write_video(os.path.join(video_dir, _relative_path(video, extension)),
                 _render_frames(video), settings.fps, codec)
  class_names = sorted({video.class_name for video in videos})
  _write_lists(split_dir, class_names, videos, extension)
  return {
      'output_dir': output_dir, 'video_dir': video_dir, 'split_dir': split_dir,
      'class_names': class_names, 'codec': codec, 'extension': extension,
      'fps': settings.fps, 'num_train': sum(video.split == 'train' for video in videos),
      'num_test': sum(video.split == 'test' for video in videos),
      'videos': [_describe(video, extension) for video in videos],
  }


def _check_output_dir(output_dir):
  """Raises ConfigError unless output_dir is given and holds no videos/ or splits/ yet."""
  if not output_dir:
    raise ConfigError('output_dir is required: the directory the videos and lists go to')
  for name in ('videos', 'splits'):
    if os.path.isdir(os.path.join(output_dir, name)) and os.listdir(
        os.path.join(output_dir, name)):
      raise ConfigError('output_dir=%s already holds %s/; remove it or choose another directory'
                       % (output_dir, name))


def _pick_encoder():
  """(codec, extension) of the first encoder in _ENCODERS that this PyAV build has."""
  for codec, extension in _ENCODERS:
    try:
      av.codec.Codec(codec, 'w')
    except ValueError:  # PyAV's UnknownCodecError: absent, or a decoder only.
      continue
    return codec, extension
  raise ConfigError('PyAV %s has none of the encoders %s'
                   % (av.__version__, ', '.join(codec for codec, _ in _ENCODERS)))


def _plan(settings):
  """Draws every video's parameters from settings.seed, class by class, in file-name
  order."""
  rng = np.random.default_rng(settings.seed)
  videos_per_class, min_frames, max_frames, sizes = (
      settings.videos_per_class, settings.min_frames, settings.max_frames, settings.sizes)
  num_groups = math.ceil(videos_per_class / _CLIPS_PER_GROUP)
  num_test_groups = min(num_groups - 1, max(1, round(settings.test_fraction * num_groups)))
  names = sorted(name for name, _ in DIRECTIONS[:settings.num_classes])
  directions = dict(DIRECTIONS)
  videos = []
  for label, class_name in enumerate(names):
    group_textures = rng.integers(2**31, size=num_groups)
    lengths = rng.integers(min_frames, max_frames, endpoint=True, size=videos_per_class)
    lengths[0], lengths[-1] = min_frames, max_frames
    clips_so_far = collections.Counter()
    for index in range(videos_per_class):
      group = index * num_groups // videos_per_class + 1  # Group sizes differ by one at most.
      clips_so_far[group] += 1
      height, width = sizes[rng.integers(len(sizes))]
      videos.append(_Video(
          class_name=class_name, label=label, group=group, clip=clips_so_far[group],
          split='test' if group <= num_test_groups else 'train',
          num_frames=int(lengths[index]), height=int(height), width=int(width),
          direction=directions[class_name], speed=float(rng.uniform(*_SPEED_RANGE)),
          start=(int(rng.integers(height)), int(rng.integers(width))),
          texture_seed=int(group_textures[group - 1]), noise_seed=int(rng.integers(2**31))))
  return videos


def _render_frames(video):
  """The frames of one planned video: uint8 [num_frames, height, width, 3] RGB."""
  noise_rng = np.random.default_rng(video.noise_seed)
  shape = (video.num_frames, video.height, video.width, 3)
  frames = np.clip(noise_rng.normal(_NOISE_MEAN, _NOISE_STD, shape), 0, 255).astype(np.uint8)
  side = int(min(video.height, video.width) * _OBJECT_FRACTION)
  # Two objects half a frame apart in both axes: between them they cross every row and
  # most columns, so any 112 x 112 crop at short side 128 shows one of them moving.
  textures = _textures(video.texture_seed, side)
  starts = (video.start, (video.start[0] + video.height // 2, video.start[1] + video.width // 2))
  offsets = np.arange(side)
  for t, frame in enumerate(frames):
    # Rounding each frame's total displacement (not adding rounded steps) keeps the mean
    # speed exact; the modulo wraps the objects around the edges.
    dy = round(video.speed * t * video.direction[0])
    dx = round(video.speed * t * video.direction[1])
    for (y, x), texture in zip(starts, textures):
      rows, cols = (y + dy + offsets) % video.height, (x + dx + offsets) % video.width
      frame[np.ix_(rows, cols)] = texture
  return frames


def _textures(seed, side):
  """Two uint8 [side, side, 3] textures of _TEXTURE_CELLS^2 blocks of random colour."""
  cells = np.random.default_rng(seed).integers(
      0, 256, (2, _TEXTURE_CELLS, _TEXTURE_CELLS, 3), dtype=np.uint8)
  return [cv2.resize(texture, (side, side), interpolation=cv2.INTER_NEAREST)
          for texture in cells]


def _write_video(path, frames, fps, codec):
  """Encodes uint8 [T, H, W, 3] RGB frames (H, W even) as yuv420p video at `path`
  (its directory created if missing)."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with av.open(path, 'w') as container:
    stream = container.add_stream(codec, rate=fractions.Fraction(fps).limit_denominator(1001))
    stream.height, stream.width = frames.shape[1:3]
    stream.pix_fmt = 'yuv420p'
    # One thread: sliced multi-threaded coding would make the bytes depend on the machine.
    stream.codec_context.thread_count = 1
    # Quantiser 2-4 (of 31) keeps the texture and most of the noise; files stay small.
    stream.codec_context.qmin, stream.codec_context.qmax = 2, 4
    for frame in frames:
      container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')))
    container.mux(stream.encode())


def _relative_path(video, extension):
  return '%s/v_%s_g%02d_c%02d%s' % (video.class_name, video.class_name, video.group,
                                    video.clip, extension)


def _write_lists(split_dir, class_names, videos, extension):
  """classInd.txt, trainlist01.txt, testlist01.txt with CRLF line ends, labels 1-based."""
  os.makedirs(split_dir, exist_ok=True)
  lines = {
      'classInd.txt': ['%d %s' % (label + 1, name) for label, name in enumerate(class_names)],
      'trainlist01.txt': ['%s %d' % (_relative_path(video, extension), video.label + 1)
                          for video in videos if video.split == 'train'],
      'testlist01.txt': [_relative_path(video, extension)
                         for video in videos if video.split == 'test'],
  }
  for file_name, file_lines in lines.items():
    with open(os.path.join(split_dir, file_name), 'w', newline='') as handle:
      handle.write(''.join(line + '\r\n' for line in file_lines))


def _describe(video, extension):
  fields = ('class_name', 'label', 'group', 'clip', 'split', 'num_frames', 'height', 'width',
            'direction', 'speed')
  return dict({'path': _relative_path(video, extension)},
              **{field: getattr(video, field) for field in fields})
