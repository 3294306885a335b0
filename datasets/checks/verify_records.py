"""Checks a converted dataset record by record: the work of `python -m datasets.verify_records`.

For every shard of every split (or of `--splits`): the framing and both CRCs of each
record (`damaged_shards.read_records`), that each record parses as the dataset's records
do (a video's chunk SequenceExample with its frame lists, an image's Example), that every
frame or image decodes (`tf.io.decode_jpeg` for video frames, as training decodes them;
`tf.io.decode_image` for images), for video records (format 2) that the shard's index
reads and lists exactly the chunks the shard holds (`index_check`), and that each shard
holds the records the conversion wrote: the videos manifest.json lists for it, in order,
or for images the contiguous share of the split's size that shard i of N gets. Each
damaged shard is reported with what is wrong and the command that rebuilds it and its
index (`damaged_shards.rebuild_command`).

A record layout plugs in as a parser, `parse(data) -> ParsedRecord` (raising ValueError
for a record that does not parse), and optionally an index check; `record_parser(info)`
picks them from dataset_info.json. A video's records are consecutive (one per video in
format 1, its chunks in format 2), so what does not decode is told per video.
"""

import dataclasses
import os
from typing import List, Optional, Tuple

from core.params import param
from datasets.checks import index_check
from datasets.formats import checked_decode, converted_data, damaged_shards, shards, video_records
from datasets.formats.dataset_split import DatasetError
from tf_compat import tf

__all__ = ['VerifyConfig', 'ParsedRecord', 'ShardCheck', 'DatasetCheck', 'record_parser',
           'FrameDecoder', 'check_shard', 'verify_dataset', 'report_lines']


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
  """What to check; each field is also a flag of `python -m datasets.verify_records`."""
  # Data.
  dataset_dir: Optional[str] = param(None, 'The converted dataset directory to check.')
  splits: Tuple[str, ...] = param((), 'Splits to check; unset: every split '
                                  'dataset_info.json lists.')
  # Checks.
  decode: bool = param(True, 'Decode every frame (or image); --nodecode checks the '
                       'framing, CRCs, parsing and record counts only.')
  num_parallel_calls: int = param(os.cpu_count() or 1, 'Frames decoded at once.')


@dataclasses.dataclass(frozen=True)
class ParsedRecord:
  """One record's contents: `name` ('video <id>'; None for an image), `id` (the video id
  the manifest lists, or None) and `frames` [(frame index in the video, [encoded bytes of
  each channel group])], from `first_frame` on (a chunk's first frame; 0 otherwise)."""
  name: Optional[str]
  id: Optional[str]
  frames: list
  first_frame: int = 0


def _parse_image(data):
  try:
    example = tf.train.Example.FromString(data)
  except Exception as error:  # pylint: disable=broad-except  (protobuf's DecodeError)
    raise ValueError('not an Example (%s)' % error) from None
  encoded = example.features.feature['image/encoded'].bytes_list.value
  if not encoded:
    raise ValueError('lacks image/encoded')
  return ParsedRecord(None, None, [(0, (encoded[0],))])


def record_parser(info):
  """-> (parse(data) -> ParsedRecord, decoder kind 'jpeg' | 'image', index check or None)
  for the records dataset_info.json `info` describes: video records of format 2 are
  chunks with an index (`index_check`), of format 1 whole videos."""
  if not info.get('modality'):
    return _parse_image, 'image', None
  if info.get('format_version', 1) == video_records.FORMAT_VERSION:
    return (index_check.chunk_parser(info['modality'], ParsedRecord), 'jpeg',
            index_check.check_index)
  return (index_check.chunk_parser(info['modality'], ParsedRecord, chunked=False), 'jpeg',
          None)


class FrameDecoder:
  """decoded(list of encoded bytes) -> [bool]: whether each decodes, in one session run
  (`checked_decode.map_checked`, `num_parallel_calls` at once)."""

  def __init__(self, kind, num_parallel_calls):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._values = tf.placeholder(tf.string, [None])
      decode = (tf.io.decode_jpeg if kind == 'jpeg' else
                lambda v: tf.io.decode_image(v, expand_animations=False))
      _, self._ok = checked_decode.map_checked(
          self._values, lambda value: tf.size(decode(value)) > 0, [], tf.bool,
          num_parallel_calls=num_parallel_calls)
    self._session = tf.Session(graph=self._graph)

  def __call__(self, encoded):
    return list(self._session.run(self._ok, {self._values: list(encoded)}))

  def close(self):
    self._session.close()


@dataclasses.dataclass
class ShardCheck:
  """What one shard holds and what is wrong with it (problems: one phrase each)."""
  path: str
  records: int = 0
  frames: int = 0
  ids: List[str] = dataclasses.field(default_factory=list)
  problems: List[str] = dataclasses.field(default_factory=list)


def _undecodable(parsed, decoder):
  """Frame indices of `parsed` with a channel group that does not decode."""
  encoded = [data for _, groups in parsed.frames for data in groups]
  ok = iter(decoder(encoded)) if encoded else iter(())
  return [index for index, groups in parsed.frames
          if not all([next(ok) for _ in groups])]


def _add_undecoded(videos, number, parsed, bad):
  """Adds one video record's frames to `videos`, [[name, first record, last record,
  frames, undecoded]]: a record of the video before it extends its entry."""
  if videos and videos[-1][0] == parsed.name and videos[-1][2] == number - 1:
    videos[-1][2] = number
    videos[-1][3] += len(parsed.frames)
    videos[-1][4] += bad
  else:
    videos.append([parsed.name, number, number, len(parsed.frames), list(bad)])


def _undecoded_problems(videos):
  return ['%s (%s): %s %s of %d do%s not decode' % (
      'record %d' % first if first == last else 'records %d..%d' % (first, last), name,
      'frame' if len(bad) == 1 else 'frames', ', '.join(map(str, bad)), frames,
      'es' if len(bad) == 1 else '') for name, first, last, frames, bad in videos if bad]


def check_shard(path, parse, decoder=None, expected=None, index=None):
  """Checks one shard: framing, CRCs, parsing, decoding (with a decoder), the index (with
  `index`, an index check: index_check.check_index) and, with `expected` (a list of ids,
  or a record count), that it holds those records.

  Returns:
    ShardCheck.
  """
  check = ShardCheck(path)
  chunks, videos = [], []
  for record in damaged_shards.read_records(path):
    if record.problem:
      check.problems.append(record.problem)
      continue
    check.records += 1
    try:
      parsed = parse(record.data)
    except ValueError as error:
      check.problems.append('record %d (byte %d) does not parse: %s'
                            % (record.index, record.offset, error))
      continue
    chunks.append(index_check.Chunk(record.offset, record.offset + len(record.data) + 16,
                                    parsed.id, parsed.first_frame, len(parsed.frames)))
    check.frames += len(parsed.frames)
    bad = _undecodable(parsed, decoder) if decoder else []
    if bad and parsed.name is None:
      check.problems.append('record %d: the image does not decode' % record.index)
    elif parsed.name is not None:
      _add_undecoded(videos, record.index, parsed, bad)
  check.problems += _undecoded_problems(videos)
  check.ids = [chunk.id for chunk in chunks]
  if index is not None:
    check.ids, problems = index(path, chunks)
    check.problems += problems
  _check_expected(check, expected)
  return check


def _check_expected(check, expected):
  if expected is None:
    return
  if isinstance(expected, int):
    if check.records != expected:
      check.problems.append('holds %d readable records, the conversion wrote %d'
                            % (check.records, expected))
  elif len(check.ids) != len(expected):
    check.problems.append('holds %d readable videos, the conversion wrote %d'
                          % (len(check.ids), len(expected)))
  elif check.ids != list(expected):
    check.problems.append('its videos are not the ones manifest.json lists for it (e.g. %s)'
                          % next(i for i, e in zip(check.ids, expected) if i != e))


@dataclasses.dataclass
class DatasetCheck:
  """Every shard checked in `dataset_dir`, and the shards of a split that are missing."""
  dataset_dir: str
  unit: str                                    # 'videos' or 'images'
  shards: List[ShardCheck] = dataclasses.field(default_factory=list)
  missing: List[str] = dataclasses.field(default_factory=list)   # shard paths

  @property
  def damaged(self):
    return [shard for shard in self.shards if shard.problems]


def _read_info(config):
  if not config.dataset_dir or not tf.io.gfile.isdir(config.dataset_dir):
    raise DatasetError('--dataset_dir=%s is not a directory: give the converted dataset to '
                       'check' % config.dataset_dir)
  info = converted_data.read_dataset_info(config.dataset_dir)
  if info is None:
    raise DatasetError('--dataset_dir=%s holds no converted dataset (no %s)'
                       % (config.dataset_dir, converted_data.INFO_FILENAME))
  unknown = sorted(set(config.splits) - set(info['splits']))
  if unknown:
    raise DatasetError('--splits=%s: %s has no split %s; valid: %s' % (
        ','.join(config.splits), config.dataset_dir, ', '.join(unknown),
        ', '.join(sorted(info['splits']))))
  if config.num_parallel_calls < 1:
    raise DatasetError('--num_parallel_calls=%d must be >= 1' % config.num_parallel_calls)
  return info


def _shard_paths(dataset_dir, split, listing):
  """(shard paths found, paths of missing shards): the manifest's set when it lists one,
  else the set the files' -of-N names say."""
  names = sorted(name for name in listing if listing[name]['split'] == split)
  if not names:
    try:
      return shards.find_shards(dataset_dir, split), []
    except ValueError:
      found = {}
      for name in tf.io.gfile.listdir(dataset_dir):
        parsed = shards.parse_shard_name(name)
        if parsed and parsed[0] == split:
          found[name] = parsed[2]
      names = [shards.shard_name(split, i, count)
               for count in sorted(set(found.values())) for i in range(count)]
  paths = [os.path.join(dataset_dir, name) for name in names]
  return ([p for p in paths if tf.io.gfile.exists(p)],
          [p for p in paths if not tf.io.gfile.exists(p)])


def _expected(path, info, listing):
  """The ids manifest.json lists for the shard, or for images its record count."""
  name = os.path.basename(path)
  if name in listing:
    return [video['id'] for video in listing[name]['videos']]
  if info.get('modality'):
    return None
  split, index, count = shards.parse_shard_name(name)
  total = int(info['splits'][split])
  return (index + 1) * total // count - index * total // count


def verify_dataset(config):
  """Checks every shard of the splits of `config.dataset_dir`; returns a DatasetCheck.

  Raises:
    DatasetError (a ConfigError): no such directory or split, or no converted dataset.
  """
  info = _read_info(config)
  manifest = damaged_shards.read_manifest(config.dataset_dir)
  listing = manifest.get('shard_contents') or {}
  parse, kind, index = record_parser(info)
  decoder = FrameDecoder(kind, config.num_parallel_calls) if config.decode else None
  result = DatasetCheck(config.dataset_dir, 'videos' if info.get('modality') else 'images')
  try:
    for split in config.splits or sorted(info['splits']):
      paths, missing = _shard_paths(config.dataset_dir, split, listing)
      result.missing += missing
      result.shards += [check_shard(path, parse, decoder, _expected(path, info, listing),
                                    index) for path in paths]
  finally:
    if decoder:
      decoder.close()
  return result


def report_lines(result):
  """The verifier's output: one line per damaged or missing shard with its rebuild
  command, then a summary line."""
  lines = []
  for shard in result.damaged:
    lines.append('damaged: %s: %s' % (shard.path, '; '.join(shard.problems)))
    lines.append('  rebuild: %s' % damaged_shards.rebuild_command(shard.path))
  for path in result.missing:
    lines.append('missing: %s' % path)
    lines.append('  rebuild: %s' % damaged_shards.rebuild_command(path))
  bad = len(result.damaged) + len(result.missing)
  lines.append('checked %d shards of %s: %d %s, %d frames; %s' % (
      len(result.shards), result.dataset_dir, sum(len(s.ids) for s in result.shards),
      result.unit, sum(s.frames for s in result.shards),
      '%d damaged or missing (above)' % bad if bad else 'every record reads and decodes'))
  return lines
