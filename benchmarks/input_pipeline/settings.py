"""The settings of `python -m benchmarks.input_pipeline`: one flag per field, built once in
`main()` and passed to every measurement (each reads only the fields it names)."""

import dataclasses
import os
from typing import Optional

from core.params import ConfigError, param

_CORES = os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class InputPipelineSettings:
  """What the input benchmark measures and on which data; `check_settings` holds the rules."""
  # Measurements.
  rounds: int = param(7, 'Alternating rounds after the warm-up; medians reported.')
  clips: bool = param(True, 'Measure the clip pipeline against the decode bound and the '
                      'frame-folder loaders.')
  converter: bool = param(True, 'Measure the converter against ffmpeg.')
  breakdown: bool = param(False, 'Instead of the comparison: single-core ms per clip of each '
                          'step of the training map function, and of alternatives.')
  long_videos: bool = param(False, 'Instead of the comparison: training clips/s and bytes read '
                            'per clip on --long_frames against --clip_frames videos, and '
                            '--eval_frames whole-video evaluation.')
  # Clips.
  batch_size: int = param(6, 'Clips per batch (I3D_Finetune trains with 6).')
  batches: int = param(12, 'Timed batches per clip measurement.')
  warmup_batches: int = param(3, 'Untimed batches per clip measurement.')
  clip_frames: int = param(64, 'Frames per clip.')
  crop_size: int = param(224, 'Clip height and width.')
  num_readers: int = param(4, 'build_clip_dataset num_readers.')
  num_parallel_calls: int = param(_CORES, 'Parallel clips in the record pipeline and in the '
                                  'tf.data frame-folder loader (default: cores).')
  num_processes: int = param(_CORES, 'Decode-bound processes, converter decoding processes '
                             'and parallel ffmpeg processes (default: cores).')
  decode_seconds: float = param(3.0, 'Seconds each decode-bound process decodes.')
  # Synthetic videos.
  num_classes: int = param(4, 'Synthetic classes.')
  videos_per_class: int = param(12, 'Synthetic videos per class (3/4 train).')
  min_frames: int = param(64, 'Shortest synthetic video (>= clip_frames, so every clip '
                          'decodes clip_frames distinct frames).')
  max_frames: int = param(120, 'Longest synthetic video.')
  video_size: str = param('240x320', 'HEIGHTxWIDTH of the synthetic videos.')
  short_side: int = param(256, 'Short side of the converted frames.')
  # Long videos.
  long_frames: int = param(300, 'Frames of every long video (--long_videos).')
  eval_frames: int = param(250, 'Whole-video evaluation: the first N frames (--long_videos).')
  # Directories.
  conversion_dir: Optional[str] = param(
      None, 'Where the converter and ffmpeg write each round (default: inside the work '
      'directory; e.g. /dev/shm leaves the disk out).')
  work_dir: Optional[str] = param(None, 'New or empty directory for the data, kept '
                                  '(default: a temporary directory, removed at the end).')

  @property
  def video_shape(self):
    """(height, width) of the synthetic videos, from `video_size`."""
    height, width = (int(side) for side in self.video_size.lower().split('x'))
    return height, width


def check_settings(settings):
  """Returns `settings` if the benchmark can run with them; ConfigError names the flag."""
  if settings.min_frames < settings.clip_frames:
    raise ConfigError('--min_frames=%d must be >= --clip_frames=%d: shorter videos loop and '
                      'decode fewer distinct frames than the bound counts'
                      % (settings.min_frames, settings.clip_frames))
  if settings.long_frames < settings.clip_frames or settings.eval_frames < 1:
    raise ConfigError('--long_frames=%d must be >= --clip_frames=%d and --eval_frames=%d >= 1'
                      % (settings.long_frames, settings.clip_frames, settings.eval_frames))
  try:
    settings.video_shape  # pylint: disable=pointless-statement
  except ValueError:
    raise ConfigError('--video_size=%s is not accepted: use HEIGHTxWIDTH, e.g. 240x320'
                      % settings.video_size) from None
  return settings
