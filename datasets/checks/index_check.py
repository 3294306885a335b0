"""The checks of format-2 video records' indexes (layout in `datasets/formats/video_records.py`):
each record a chunk of a video, each shard with an index that lists every video's chunks
by frame and byte bounds. Used by `verify_records` (`python -m datasets.verify_records`),
and by training and eval before they build a graph (`check_index_counts`).

  chunk_parser(modality, ParsedRecord)  parse(one chunk record) -> ParsedRecord
  check_index(shard, chunks)            the shard's index read (framing and CRCs, as the
                                        shard's) and compared with the chunks the shard
                                        holds: -> (video ids, [problems])
  check_index_counts(split)             the split's indexes list as many videos as
                                        dataset_info.json: DamagedShards otherwise

The index must list exactly the shard's chunks: entry by entry, its byte bounds are the
records' (contiguous from byte 0 to the end of the shard), and its frame bounds the
chunks' first frames and lengths, under the chunks' video id. What the clip reader would
trip over is what is reported: a chunk it would not find where the index says, or would
find holding other frames.
"""

import os
import typing

from core.errors import DataError
from datasets.formats import converted_data, damaged_shards, video_records
from tf_compat import tf

__all__ = ['Chunk', 'chunk_parser', 'check_index', 'check_index_counts']


class Chunk(typing.NamedTuple):
  """One readable record of a shard: its bytes [start, end) and what it holds."""
  start: int
  end: int
  id: typing.Optional[str]
  first_frame: int
  frames: int


def chunk_parser(modality, parsed_record, chunked=True):
  """-> parse(data) -> parsed_record(name, id, frames, first_frame) of one chunk record
  (format 2), frames numbered in the video; with chunked=False of one whole-video record
  (format 1, from frame 0). ValueError for a record that is not one."""
  keys = video_records.frame_feature_keys(modality)

  def parse(data):
    try:
      example = tf.train.SequenceExample.FromString(data)
    except Exception as error:  # pylint: disable=broad-except  (protobuf's DecodeError)
      raise ValueError('not a SequenceExample (%s)' % error) from None
    context = example.context.feature
    ids = context['example/id'].bytes_list.value
    firsts = context['chunk/first_frame'].int64_list.value if chunked else [0]
    lists = example.feature_lists.feature_list
    missing = [key for key in keys if key not in lists]
    if not ids or not firsts or missing:
      raise ValueError('lacks %s' % ', '.join(
          missing + ['example/id'] * (not ids) + ['chunk/first_frame'] * (not firsts)))
    per_key = [[f.bytes_list.value[0] if f.bytes_list.value else b''
                for f in lists[key].feature] for key in keys]
    video_id = ids[0].decode('utf-8', 'replace')
    frames = [(firsts[0] + i, groups) for i, groups in enumerate(zip(*per_key))]
    return parsed_record('video %s' % video_id, video_id, frames, firsts[0])
  return parse


def _entries(index_path):
  """-> ([(video id, frame bounds, byte bounds)] of the entries that read, [problems])."""
  if not tf.io.gfile.exists(index_path):
    return [], ['its index %s is missing' % index_path]
  entries, problems = [], []
  for record in damaged_shards.read_records(index_path):
    if record.problem:
      problems.append('its index %s: %s' % (index_path, record.problem))
      continue
    try:
      features = tf.train.Example.FromString(record.data).features.feature
      entry = (features['example/id'].bytes_list.value[0].decode('utf-8', 'replace'),
               list(features['chunk/frame_bounds'].int64_list.value),
               list(features['chunk/byte_bounds'].int64_list.value))
    except Exception:  # pylint: disable=broad-except  (DecodeError, IndexError)
      problems.append('its index %s: entry %d does not parse' % (index_path, record.index))
      continue
    entries.append(entry)
  return entries, problems


def _entry_problem(entry, by_start, position):
  """What the clip reader would find wrong reading `entry`'s chunks; None if nothing."""
  video_id, frame_bounds, byte_bounds = entry
  if len(frame_bounds) != len(byte_bounds) or len(byte_bounds) < 2:
    return 'its index lists video %s with %d frame and %d byte bounds' % (
        video_id, len(frame_bounds), len(byte_bounds))
  if byte_bounds[0] != position:
    return 'its index lists video %s from byte %d where the video before it ends at %d' % (
        video_id, byte_bounds[0], position)
  for k in range(len(byte_bounds) - 1):
    chunk = by_start.get(byte_bounds[k])
    wanted = Chunk(byte_bounds[k], byte_bounds[k + 1], video_id, frame_bounds[k],
                   frame_bounds[k + 1] - frame_bounds[k])
    if chunk != wanted:
      return ('its index lists frames %d..%d of video %s at bytes %d..%d, where the shard '
              'holds %s' % (wanted.first_frame, frame_bounds[k + 1] - 1, video_id,
                            wanted.start, wanted.end, _described(chunk)))
  return None


def _described(chunk):
  if chunk is None:
    return 'no readable record starting there'
  return 'frames %d..%d of video %s (bytes %d..%d)' % (
      chunk.first_frame, chunk.first_frame + chunk.frames - 1, chunk.id, chunk.start,
      chunk.end)


def check_index(shard_path, chunks):
  """Compares a shard's index with `chunks`, the shard's readable records (Chunk) in order.

  Returns:
    (the video ids the index lists, in order; or, when it does not read, those of the
     chunks, each video once: [str]; problems, one phrase each: [str]).
  """
  entries, problems = _entries(video_records.index_path(shard_path))
  if problems:
    ids = [chunk.id for k, chunk in enumerate(chunks)
           if k == 0 or chunks[k - 1].id != chunk.id]
    return ids, problems
  by_start = {chunk.start: chunk for chunk in chunks}
  position = 0
  for entry in entries:
    problem = _entry_problem(entry, by_start, position)
    if problem:
      problems.append(problem)
      break
    position = entry[2][-1]
  size = tf.io.gfile.stat(shard_path).length
  if not problems and position != size:
    problems.append('its index lists %d of its %d bytes: it holds records the index does '
                    'not list' % (position, size))
  return [entry[0] for entry in entries], problems


def _count_problem(index_path, listed):
  """(entries a reader finds in one index, what is wrong with it or None); `listed`: the
  videos manifest.json lists for its shard, or None."""
  if not tf.io.gfile.exists(index_path):
    return 0, 'missing'
  count, problem = damaged_shards.count_records(index_path)
  if problem is None and listed is not None and count != listed:
    problem = ('its %d entries are not the %d videos manifest.json lists for the shard (cut '
               'at an entry\'s end?)' % (count, listed))
  return count, problem


def check_index_counts(split):
  """Training and eval, before a graph: the indexes of `split` (a DatasetSplit) list the
  split.num_samples videos dataset_info.json counts. TensorFlow's reader takes an index
  cut inside an entry's 12-byte header for its end, so the input would read fewer videos
  without an error. Reads the indexes' headers only. Image splits have no index: no-op.

  Raises:
    DamagedShards: an index cut, corrupted, missing, or short of its shard's videos in
      manifest.json (one line: the file, what is wrong, the rebuild command).
    DataError: only the total differs (no manifest to tell which index).
  """
  if split.modality is None:
    return
  contents = damaged_shards.read_manifest(split.dataset_dir).get('shard_contents') or {}
  total, damaged = 0, []
  for shard in sorted(tf.io.gfile.glob(split.file_pattern)):
    listed = contents.get(os.path.basename(shard), {}).get('videos')
    path = video_records.index_path(shard)
    count, problem = _count_problem(path, None if listed is None else len(listed))
    total += count
    if problem:
      damaged.append((path, problem))
  if damaged:
    raise damaged_shards.DamagedShards(damaged)
  if total != split.num_samples:
    raise DataError('%s counts %d %s videos, but the indexes of its shards list %d; python -m '
                    'datasets.verify_records --dataset_dir=%s names the damaged shard' % (
                        os.path.join(split.dataset_dir, converted_data.INFO_FILENAME),
                        split.num_samples, split.split_name, total, split.dataset_dir))
