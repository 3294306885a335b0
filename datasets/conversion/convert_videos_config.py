"""The settings of one video conversion (`python -m datasets.convert_videos`'s flags).

Kept apart from `convert_videos` because the converter's decoding workers start by
importing the tool's module again (multiprocessing's spawn), and that module imports this
one: nothing here imports TensorFlow.
"""

import dataclasses
from typing import Optional

from core.params import param
from datasets.splits.source_groups import DEFAULT_GROUP_BY  # TensorFlow-free too

__all__ = ['VideoConversion', 'with_task_from_environment', 'TASK_INDEX_VARIABLE']

TASK_INDEX_VARIABLE = 'JOB_COMPLETION_INDEX'  # set by a Kubernetes Indexed Job


@dataclasses.dataclass(frozen=True)
class VideoConversion:
  """One conversion; each field is also a flag of `python -m datasets.convert_videos`."""
  # Source.
  dataset_name: Optional[str] = param(None, 'One of ucf101, hmdb51, video_folder.')
  video_dir: Optional[str] = param(None, 'Root of the videos (<class>/<video> below it).')
  frames_dir: Optional[str] = param(None, 'Import extracted frames instead of videos: '
                                    'jpegs_256/ (rgb) or tvl1_flow/ with u/ and v/ (flow).')
  splits_dir: Optional[str] = param(None, 'Official split lists (classInd.txt, '
                                    'trainlist0N.txt, ...); video_folder: optional.')
  split: int = param(1, 'Official split, 1 to 3.')
  test_fraction: float = param(0.3, 'video_folder without lists: held-out test fraction '
                               '(of each class\'s sources, see --group_by).')
  group_by: str = param(DEFAULT_GROUP_BY, 'video_folder without lists: a regular expression '
                        'whose first group (or whole match) in a file name names the video\'s '
                        'source within its class; a source\'s clips all go to one split. The '
                        'default reads UCF101-style names (v_X_g08_c01.avi: group 08); names '
                        'it does not match are sources of their own; empty: single videos.')
  # Frames.
  modality: str = param('rgb', 'rgb (3 channels) or flow (TV-L1, 2 channels).')
  short_side: int = param(256, 'Resize so the shorter side has this size, aspect kept; '
                          '0 keeps the size.')
  fps: float = param(0.0, 'Resample to this frame rate; 0 keeps the source rate.')
  jpeg_quality: int = param(90, 'JPEG quality of the stored frames.')
  # Output.
  output_dir: Optional[str] = param(None, 'Directory for shards, labels and manifest.')
  num_shards: int = param(10, 'Shards per split (fewer if there are fewer videos).')
  # 8 is video_records.DEFAULT_CHUNK_FRAMES (not imported: that module imports TensorFlow).
  chunk_frames: int = param(8, 'Frames per record: a clip reads only the records holding '
                            'its frames (datasets/formats/video_records.py).')
  seed: int = param(0, 'Seed of the shard order (and of the video_folder split).')
  # Run.
  num_processes: int = param(2, 'Videos decoded in parallel (decoding processes).')
  video_timeout: float = param(300.0, 'Seconds one video may take before it is skipped.')
  strict: bool = param(False, 'Stop at the first bad video instead of skipping it.')
  progress: bool = param(True, 'Progress on stderr: a bar on a terminal, otherwise a line '
                         'every 5 percent of the videos (as in a pod\'s log).')
  # Several machines.
  num_conversion_tasks: int = param(
      1, 'Tasks converting into one shared --output_dir (machines, pods); task k converts '
      'shards k, k + n, ...; the last to finish writes the manifest and dataset_info.json.')
  conversion_task_index: Optional[int] = param(
      None, 'This task, 0 to --num_conversion_tasks - 1; unset: $JOB_COMPLETION_INDEX (a '
      'Kubernetes Indexed Job), else 0.')
  # Repair.
  only_shard: Optional[str] = param(
      None, 'Rewrite just this shard (e.g. train-00003-of-00010) of the finished conversion '
      'in --output_dir, byte for byte, from the videos and settings its manifest.json '
      'records; --video_dir or --frames_dir may point to where the sources are now.')

  def settings(self):
    """What must match for a rerun to resume in the same output_dir."""
    keep = ('dataset_name', 'split', 'modality', 'short_side', 'fps', 'num_shards',
            'jpeg_quality', 'seed', 'test_fraction', 'chunk_frames')
    # group_by only where it decides the split: published lists ignore it, and a
    # conversion recorded before it existed resumes as before.
    grouped = self.dataset_name == 'video_folder' and not self.splits_dir
    return {name: getattr(self, name) for name in keep} | {
        'source': 'frames' if self.frames_dir else 'videos'} | (
            {'group_by': self.group_by} if grouped else {})


def with_task_from_environment(conversion, environ):
  """`conversion` with conversion_task_index from $JOB_COMPLETION_INDEX when unset (the
  entry's main passes os.environ; a value that is not an integer is kept for the check)."""
  if conversion.conversion_task_index is not None or TASK_INDEX_VARIABLE not in environ:
    return conversion
  value = environ[TASK_INDEX_VARIABLE]
  return dataclasses.replace(
      conversion, conversion_task_index=int(value) if value.strip().isdigit() else -1)
