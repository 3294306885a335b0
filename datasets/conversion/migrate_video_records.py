"""Older video records -> today's layout: the work of `python -m datasets.migrate_video_records`.

Format 1 (no "format_version" in dataset_info.json) held one `tf.train.SequenceExample` per
whole video, with the keys of `datasets/formats/video_records.py` but every frame in one record.
`migrate_video_records` rewrites each of its shards as a shard of chunk records with an
index (format 2), into a new directory; the old one is only read.

- Frames are copied byte for byte (the JPEG bytes are never decoded), and so is each
  video's context; videos keep their shard and their order in it, so the shard names,
  `manifest.json` (copied, with the new shards' SHA-256s and the chunk size) and every
  per-shard list still describe the new shards.
- Each shard and its index are written atomically; `dataset_info.json` is removed first and
  written last, so the new directory is a dataset only once every shard is done.
- A rerun with the same flags resumes: shards whose file and index are both there are kept.
  `migration.json` records the source and the chunk size; a rerun with others is refused.
"""

import dataclasses
import json
import os
from typing import Optional

from google.protobuf import message

from core.errors import DataError, require
from core.params import param
from datasets.conversion import shard_sources, video_shards
from datasets.formats import converted_data, video_records
from datasets.formats.shards import find_shards
from tf_compat import tf

__all__ = ['RecordMigration', 'migrate_video_records', 'summary_line']

_SETTINGS_FILE = 'migration.json'
_COPIED = ('manifest.json',)   # labels.txt is written with dataset_info.json


@dataclasses.dataclass(frozen=True)
class RecordMigration:
  """One migration; each field is also a flag of `python -m datasets.migrate_video_records`."""
  # Data.
  dataset_dir: Optional[str] = param(None, 'Converted video data in an older record format '
                                     '(only read).')
  output_dir: Optional[str] = param(None, 'New directory for the same data in today\'s '
                                    'layout; a rerun into it resumes.')
  # Records.
  chunk_frames: int = param(video_records.DEFAULT_CHUNK_FRAMES,
                            'Frames per record (datasets/formats/video_records.py).')


def _checked_info(migration):
  """-> the old dataset_info.json; ConfigError (usage) or DataError (the data) otherwise."""
  require(migration.dataset_dir, '--dataset_dir is required: the converted video data')
  require(migration.output_dir, '--output_dir is required: a new directory')
  require(migration.chunk_frames >= 1, '--chunk_frames=%d must be >= 1'
          % migration.chunk_frames)
  source = os.path.realpath(migration.dataset_dir)
  target = os.path.realpath(migration.output_dir)
  require(source != target and not target.startswith(source + os.sep),
          '--output_dir=%s must be a new directory outside --dataset_dir=%s'
          % (migration.output_dir, migration.dataset_dir))
  require(os.path.isdir(source), '--dataset_dir=%s does not exist' % migration.dataset_dir)
  try:
    info = converted_data.read_dataset_info(migration.dataset_dir)
  except ValueError as error:
    raise DataError('--dataset_dir=%s: %s' % (migration.dataset_dir, error)) from None
  require(info is not None, '--dataset_dir=%s holds no finished conversion (no %s)'
          % (migration.dataset_dir, converted_data.INFO_FILENAME))
  require(info.get('modality') in video_records.MODALITIES, '--dataset_dir=%s holds no '
          'video records (no modality rgb or flow)' % migration.dataset_dir)
  version = info.get('format_version', 1)
  require(version != video_records.FORMAT_VERSION, '--dataset_dir=%s already holds format '
          '%d records: nothing to migrate' % (migration.dataset_dir, version))
  require(version == 1, '--dataset_dir=%s holds format %r, which this version does not '
          'know' % (migration.dataset_dir, version))
  return info


def _check_settings(migration):
  """A rerun must migrate the same source with the same chunk size."""
  settings = {'dataset_dir': os.path.realpath(migration.dataset_dir),
              'chunk_frames': migration.chunk_frames}
  path = os.path.join(migration.output_dir, _SETTINGS_FILE)
  if os.path.exists(path):
    with open(path) as handle:
      previous = json.load(handle)
    require(previous == settings, '--output_dir=%s holds a migration of %s with '
            'chunk_frames=%s; use a new --output_dir' % (
                migration.output_dir, previous.get('dataset_dir'),
                previous.get('chunk_frames')))
  else:
    converted_data.write_text_atomically(path, json.dumps(settings, indent=2) + '\n')


def _whole_videos(shard_path, modality):
  """Yields (context feature map, frames) of each format-1 record of a shard; frames are
  JPEG bytes (rgb) or (u, v) pairs (flow), as the converter produced them."""
  keys = video_records.frame_feature_keys(modality)
  for serialized in tf.compat.v1.io.tf_record_iterator(shard_path):
    example = tf.train.SequenceExample.FromString(serialized)
    lists = [[f.bytes_list.value[0] for f in example.feature_lists.feature_list[key].feature]
             for key in keys]
    frames = lists[0] if modality == 'rgb' else list(zip(*lists))
    yield example.context.feature, frames


def _context_value(context, key, kind, default=None):
  """The first value of a context feature (`kind`: 'int64_list', ...), or `default`."""
  values = getattr(context[key], kind).value if key in context else []
  return values[0] if values else default


def _chunked_videos(shard_path, modality, chunk_frames):
  """The ChunkedVideos of a format-1 shard, one at a time, context values carried over."""
  for context, frames in _whole_videos(shard_path, modality):
    header = _header(context, modality)
    num_frames = _context_value(context, 'clip/num_frames', 'int64_list', len(frames))
    if not frames or num_frames != len(frames):
      raise DataError('%s: video %s has %d frames where its record says %s; re-run the '
                      'conversion' % (shard_path, header.video_id, len(frames),
                                      _context_value(context, 'clip/num_frames',
                                                     'int64_list')))
    yield video_shards.chunk_video(frames, header, chunk_frames)


def _header(context, modality):
  """The VideoHeader of a format-1 record's context (absent: '' for the names and the
  path, 0.0 for the frame rate)."""
  def value(key, kind, default=None):
    return _context_value(context, key, kind, default)
  return video_records.VideoHeader(
      modality=modality, label=value('clip/label/index', 'int64_list'),
      label_string=value('clip/label/string', 'bytes_list', b'').decode('utf-8'),
      video_id=value('example/id', 'bytes_list').decode('utf-8'),
      data_path=value('clip/data_path', 'bytes_list', b'').decode('utf-8'),
      height=value('image/height', 'int64_list'), width=value('image/width', 'int64_list'),
      frame_rate=value('image/frame_rate', 'float_list', 0.0))


def _migrate_shard(migration, modality, split_name, shard_path):
  """Writes one new shard and its index; -> 'kept' (done by an earlier run) or the number
  of videos written."""
  name = os.path.basename(shard_path)
  target = os.path.join(migration.output_dir, name)
  if os.path.exists(target) and os.path.exists(video_records.index_path(target)):
    return 'kept'
  count = int(name.rsplit('-', 1)[1])
  index = int(name.split('-')[-3])
  videos = []

  def counted():
    for video in _chunked_videos(shard_path, modality, migration.chunk_frames):
      videos.append(video.video_id)
      yield video

  try:
    video_shards.write_video_shard(counted(), migration.output_dir, split_name, index, count)
  except (tf.errors.OpError, message.DecodeError) as error:
    raise DataError('%s cannot be read (%s); re-run the conversion that wrote it'
                    % (shard_path, str(error).split('\n')[0])) from None
  return len(videos)


def _migrated_manifest(migration, manifest):
  """The old manifest for the new directory: the chunk size among its settings, and each
  shard's SHA-256s those of the new shard and index, so that `--only_shard` rebuilds a
  migrated shard with the same chunks and can tell whether its bytes are the same."""
  if isinstance(manifest.get('settings'), dict):
    manifest['settings']['chunk_frames'] = migration.chunk_frames
  for name, contents in (manifest.get('shard_contents') or {}).items():
    shard = os.path.join(migration.output_dir, name)
    if os.path.exists(shard):
      contents['sha256'] = shard_sources.file_sha256(shard)
      contents['index_sha256'] = shard_sources.file_sha256(video_records.index_path(shard))
  return manifest


def _copy_metadata(migration):
  """manifest.json (as it is, or with the new shards' SHA-256s and the chunk size where it
  records them) and conversion.json with the chunk size added, so a later converter rerun
  into the new directory sees the settings it was written with."""
  for name in _COPIED:
    source = os.path.join(migration.dataset_dir, name)
    if os.path.exists(source):
      with open(source) as handle:
        text = handle.read()
      manifest = json.loads(text)
      if 'shard_contents' in manifest or 'settings' in manifest:
        text = json.dumps(_migrated_manifest(migration, manifest), indent=1) + '\n'
      converted_data.write_text_atomically(os.path.join(migration.output_dir, name), text)
  source = os.path.join(migration.dataset_dir, 'conversion.json')
  if os.path.exists(source):
    with open(source) as handle:
      settings = dict(json.load(handle), chunk_frames=migration.chunk_frames)
    converted_data.write_text_atomically(os.path.join(migration.output_dir, 'conversion.json'),
                                         json.dumps(settings, indent=2) + '\n')


def migrate_video_records(migration):
  """Runs one migration (see the module docstring).

  Returns:
    {'splits': {split: videos}, 'shards': {'written': n, 'kept': n}, 'output_dir': path}.

  Raises:
    ConfigError: a bad flag, or an output_dir holding another migration; nothing written.
    DataError: a shard of dataset_dir cannot be read; shards done are kept for a rerun.
    OSError: the output could not be written.
  """
  info = _checked_info(migration)
  os.makedirs(migration.output_dir, exist_ok=True)
  _check_settings(migration)
  info_path = os.path.join(migration.output_dir, converted_data.INFO_FILENAME)
  if os.path.exists(info_path):
    os.remove(info_path)  # Written last again: the directory is complete only then.
  modality = info['modality']
  counts = {'written': 0, 'kept': 0}
  for split_name in sorted(info['splits']):
    try:
      shards = find_shards(migration.dataset_dir, split_name)
    except ValueError as error:
      raise DataError('--dataset_dir=%s: %s' % (migration.dataset_dir, error)) from None
    for shard_path in shards:
      done = _migrate_shard(migration, modality, split_name, shard_path)
      counts['kept' if done == 'kept' else 'written'] += 1
  _copy_metadata(migration)
  extra = {key: value for key, value in info.items()
           if key not in ('dataset_name', 'num_classes', 'num_channels', 'splits', 'modality',
                          'format_version')}
  extra['chunk_frames'] = migration.chunk_frames
  converted_data.write_converted_info(
      migration.output_dir, info['dataset_name'],
      [name for _, name in sorted(converted_data.read_labels_file(
          migration.dataset_dir).items())],
      info['num_channels'], info['splits'], modality=modality, extra=extra)
  return {'splits': dict(info['splits']), 'shards': counts,
          'output_dir': migration.output_dir}


def summary_line(summary):
  videos = ', '.join('%s %d' % item for item in sorted(summary['splits'].items()))
  return ('migrated %s videos into %s (format %d, %d shards written, %d kept from an '
          'earlier run)' % (videos, summary['output_dir'], video_records.FORMAT_VERSION,
                            summary['shards']['written'], summary['shards']['kept']))
