"""Rebuilds one shard of a finished video conversion from its sources, byte for byte.

    python -m datasets.convert_videos --output_dir=/data/ucf101_rgb_s1 \\
        --only_shard=train-00003-of-00010

What the conversion in --output_dir recorded is what is used: the settings
(`manifest.json` "settings", the same as conversion.json), the source directory
("source"; --video_dir or --frames_dir may say where the sources are now) and the shard's
videos in record order ("shard_contents", see `shard_sources`). Those videos are decoded
again by the converter's own code (`convert_videos.video_task`, `process_video`) and
written through the same writer (`convert_videos.write_shard_records`): the shard, then
its index, each to a temporary name renamed over the damaged file only once complete. The
new files' SHA-256s are compared with the ones the conversion recorded. Records of an
older format (format_version) are refused with the command that migrates them: a rebuilt
shard would be of today's layout among older ones.

A listed video that no longer converts stops the rebuild (DataError, status 3) and
leaves the shard as it was: a shard without it would shift every record after it.
"""

import dataclasses
import json
import os
from typing import Optional

from core.errors import DataError
from datasets.conversion import shard_sources, convert_videos
from datasets.conversion.timed_pool import run_tasks
from datasets.conversion.convert_videos_config import VideoConversion
from datasets.conversion.video_frames import process_video
from datasets.formats import converted_data, shards, video_records
from datasets.formats.dataset_split import DatasetError
from datasets.splits.video_splits import VideoEntry

__all__ = ['RebuildResult', 'rebuild_shard', 'summary_line']

# Flags that only say how to run, not what to write: free in a rebuild.
_RUN_FLAGS = ('output_dir', 'only_shard', 'video_dir', 'frames_dir', 'splits_dir',
              'num_processes', 'video_timeout', 'strict', 'progress', 'num_conversion_tasks',
              'conversion_task_index')


@dataclasses.dataclass(frozen=True)
class RebuildResult:
  """path: the rewritten shard (its index beside it); identical: the SHA-256s of the
  shard and its index equal the recorded ones (None when the conversion recorded none;
  the index's is compared where it was recorded)."""
  path: str
  videos: int
  frames: int
  sha256: str
  recorded_sha256: Optional[str]
  index_sha256: Optional[str] = None
  recorded_index_sha256: Optional[str] = None

  @property
  def identical(self):
    if self.recorded_sha256 is None:
      return None
    return self.sha256 == self.recorded_sha256 and (
        self.recorded_index_sha256 is None or self.index_sha256 == self.recorded_index_sha256)


def _manifest(output_dir):
  if not output_dir:
    raise DatasetError('--output_dir is required with --only_shard: the converted dataset '
                       'that holds the shard')
  path = os.path.join(output_dir, 'manifest.json')
  if not os.path.isfile(path):
    raise DatasetError('--output_dir=%s holds no finished video conversion (no manifest.json)'
                       '; --only_shard rebuilds a shard of one' % output_dir)
  with open(path) as handle:
    try:
      return json.load(handle)
    except ValueError as error:
      raise DataError('%s is not valid JSON (%s): convert the dataset again' % (path, error)
                      ) from None


def _contents(manifest, conversion):
  contents = manifest.get('shard_contents')
  if contents is None:
    raise DatasetError('%s/manifest.json lists no shard contents (a conversion older than '
                       '--only_shard): convert the dataset again into a new directory'
                       % conversion.output_dir)
  if conversion.only_shard not in contents:
    names = sorted(contents)
    raise DatasetError('--only_shard=%s is not a shard of %s; valid: %s%s' % (
        conversion.only_shard, conversion.output_dir, ', '.join(names[:6]),
        ', ... (%d shards)' % len(names) if len(names) > 6 else ''))
  return contents[conversion.only_shard]


def _recorded_conversion(conversion, manifest):
  """The conversion as recorded, with this run's sources (if given) and run flags."""
  settings = dict(manifest['settings'])
  source = settings.pop('source', 'videos')
  defaults = VideoConversion()
  for name, value in sorted(settings.items()):
    given = getattr(conversion, name)
    if given != value and given != getattr(defaults, name):
      raise DatasetError('--%s=%s differs from the conversion in %s (%s): --only_shard '
                         'rebuilds with its settings; drop the flag' % (
                             name, given, conversion.output_dir, value))
  recorded = manifest.get('source') or {}
  key = 'frames_dir' if source == 'frames' else 'video_dir'
  root = getattr(conversion, key) or recorded.get(key)
  if not root or not os.path.isdir(root):
    raise DatasetError('--%s=%s is not a directory: the sources of %s moved? give --%s=<where '
                       'they are now>' % (key, root, conversion.output_dir, key))
  run = {name: getattr(conversion, name) for name in _RUN_FLAGS}
  run.update(video_dir=None, frames_dir=None, splits_dir=recorded.get('splits_dir'))
  run[key] = root
  return VideoConversion(**settings, **run)


def _convert(conversion, entries):
  """[(entry, decoded result)] in order; DataError at the first video that fails."""
  tasks = [convert_videos.video_task(entry, conversion) for entry in entries]
  results = [None] * len(tasks)
  for index, result in run_tasks(process_video, tasks, conversion.num_processes,
                                 conversion.video_timeout):
    if not isinstance(result, dict):
      raise DataError('cannot rebuild %s: its video %s no longer converts (%s); the shard was '
                      'left as it was' % (conversion.only_shard, entries[index].relative_path,
                                          result))
    results[index] = result
  return list(zip(entries, results))


def rebuild_shard(conversion):
  """Rewrites shard `conversion.only_shard` of the conversion in `conversion.output_dir`.

  Returns:
    RebuildResult.
  Raises:
    DatasetError (a ConfigError): no such shard or conversion, a setting that differs, a
      source directory that is gone.
    DataError: a listed video no longer converts (the shard is left as it was), or the
      records are of an older format (the message names the command that migrates them).
    OSError: the shard could not be written.
  """
  manifest = _manifest(conversion.output_dir)
  listing = _contents(manifest, conversion)
  info = converted_data.read_dataset_info(conversion.output_dir)
  if info is not None:
    converted_data.check_format_version(info, conversion.output_dir)
  conversion = _recorded_conversion(conversion, manifest)
  split, index, count = shards.parse_shard_name(conversion.only_shard)
  names = converted_data.read_labels_file(conversion.output_dir)
  entries = [VideoEntry(video['path'], names[video['label']], video['label'])
             for video in listing['videos']]
  converted = _convert(conversion, entries)
  path = convert_videos.write_shard_records(
      conversion, convert_videos.Shard(split, index, count, entries), converted)
  return RebuildResult(path, len(converted), sum(len(r['frames']) for _, r in converted),
                       shard_sources.file_sha256(path), listing.get('sha256'),
                       shard_sources.file_sha256(video_records.index_path(path)),
                       listing.get('index_sha256'))


def summary_line(result):
  """One line for the user: what was rewritten, and whether its bytes are the original's."""
  line = 'rebuilt %s and its index: %d videos, %d frames; ' % (result.path, result.videos,
                                                               result.frames)
  if result.identical is None:
    return line + 'sha256 %s (the conversion recorded none to compare)' % result.sha256
  if result.identical:
    return line + 'byte-identical to the original conversion (sha256 %s)' % result.sha256
  return line + ('its bytes differ from the original conversion\'s (sha256 %s, recorded %s):'
                 ' the sources or the decoder versions changed since; the records are '
                 'complete' % (result.sha256, result.recorded_sha256))
