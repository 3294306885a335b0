"""Damaged record shards: where one is, what is wrong with it, the command that rebuilds it.

A TFRecord file is a sequence of records, each framed as

    uint64 length | uint32 masked CRC-32C of the length | data | uint32 masked CRC-32C of data

(little-endian). A file cut short (a partial copy) ends inside a record; a flipped byte
fails a CRC. TensorFlow's reader then raises `DataLossError: truncated record at N` or
`corrupted record at N`, naming an offset but not the file (and a file cut inside a
record's 12-byte header just ends, without an error: TensorFlow takes the partial header
for the end of the file; only `read_records` and a count of the records show that one).
Here:

  read_records(path)          every record of one file with its offset, or what is wrong
                              at the first record that cannot be read (and, past a bad
                              data CRC, the records after it)
  count_records(path)         how many records a reader will find, from the headers only
  file_problem(path)          the first thing wrong with one file, or None
  locate(error, files)        the damaged files among `files` (and their indexes) that
                              such an error came from
  read_failure(...)           graph ops: the message of a read by byte range (the video
                              input's chunk reads) that failed, naming the shard, the
                              bytes and the video; `shard_error` finds it again
  naming_damaged_shards(pattern)  a context turning a reader's error (one of those
                              below) into DamagedShards, around the session runs
  rebuild_command(shard)      the converter command that rebuilds just that shard (and
                              its index: given an index, the command of its shard)
  DamagedShards(DataError)    one line: each file, what is wrong, the commands
  shard_error(error, files)   DamagedShards for a reader's error: TensorFlow's 'truncated/
                              corrupted record at N', a file not found, or a read_failure

Every function takes a shard path (and the record framing only), never a record layout:
what a record holds is the caller's business (datasets/checks/verify_records.py parses them). A
shard may have an index beside it, `<shard>.index` (the video layout's); it is a TFRecord
file too, and its damage is mended by rebuilding the shard.
"""

import contextlib
import dataclasses
import io
import json
import os
import re
import struct
from typing import Optional

from core.errors import DataError
from datasets.formats.shards import INDEX_SUFFIX
from tf_compat import tf
# The random-access reader checks both CRCs of one record at a given offset (C++); TF
# exports it only under this module. Python's zlib has CRC-32, not CRC-32C.
from tensorflow.python.lib.io import tf_record  # pylint: disable=g-direct-tensorflow-import

__all__ = ['Record', 'read_records', 'count_records', 'file_problem', 'locate',
           'read_failure', 'rebuild_command', 'DamagedShards', 'shard_error', 'naming_damaged_shards',
           'read_manifest', 'MANIFEST_FILENAME']

MANIFEST_FILENAME = 'manifest.json'   # datasets.convert_videos' manifest
_HEADER = 12      # uint64 length + uint32 CRC of the length
_FOOTER = 4       # uint32 CRC of the data
_ERROR_AT = re.compile(r'(truncated|corrupted) record at (\d+)')
# What read_failure writes into a failed assertion's message, and shard_error reads back.
_FAILURE = re.compile(r'damaged records \((unread|unindexed)\): bytes (\d+)\.\.(\d+) of '
                      r'(.+?) for video (.+?)(?:\]|$)', re.M)
# The errors of a read that shard_error may trace to a damaged shard; others re-raise.
_READ_ERRORS = (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
               tf.errors.NotFoundError)


def _crc32c_table():
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return table


_TABLE = _crc32c_table()


def _masked_crc32c(data):
  """The masked CRC-32C TFRecord frames store (pure Python: used on 8-byte headers)."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclasses.dataclass(frozen=True)
class Record:
  """One record of a file: its number (from 0) and byte offset; `data`, or `problem` (what
  is wrong with it, one phrase) when it cannot be read."""
  index: int
  offset: int
  data: Optional[bytes] = None
  problem: Optional[str] = None


def _header(handle, offset, size, index):
  """-> (data length, None), or (None, problem) when the header is cut or corrupted."""
  if size - offset < _HEADER:
    return None, ('truncated: the file ends %d bytes into record %d\'s %d-byte header, at '
                  'byte %d' % (size - offset, index, _HEADER, offset))
  handle.seek(offset)
  header = handle.read(_HEADER)
  length, crc = struct.unpack('<QI', header)
  if _masked_crc32c(header[:8]) != crc:
    return None, ('corrupted: record %d\'s length field (byte %d) fails its CRC; nothing '
                  'after it can be read' % (index, offset))
  if offset + _HEADER + length + _FOOTER > size:
    return None, ('truncated: record %d at byte %d needs %d bytes, the file ends after %d '
                  '(%d bytes short: a partial copy?)' % (
                      index, offset, _HEADER + length + _FOOTER, size - offset,
                      offset + _HEADER + length + _FOOTER - size))
  return length, None


def _file_size(path):
  return tf.io.gfile.stat(path).length


def read_records(path):
  """Yields every Record of the TFRecord file `path` in order, each CRC-checked.

  A record whose data fails its CRC is yielded with its problem and reading goes on after
  it (its length is intact); a cut or corrupted header ends the file (nothing after it can
  be found).
  """
  size = _file_size(path)
  reader = tf_record.tf_record_random_reader(path)
  offset, index = 0, 0
  with tf.io.gfile.GFile(path, 'rb') as handle:
    while offset < size:
      length, problem = _header(handle, offset, size, index)
      if problem:
        yield Record(index, offset, problem=problem)
        return
      try:
        data, _ = reader.read(offset)
        yield Record(index, offset, data=data)
      except tf.errors.DataLossError:
        yield Record(index, offset, problem='corrupted: record %d at byte %d fails its data '
                                            'CRC' % (index, offset))
      offset += _HEADER + length + _FOOTER
      index += 1


def count_records(path):
  """(the records of the TFRecord file `path` whose framing reads, the problem that ends
  it early or None), from the record headers alone (their length CRCs; no data CRC): the
  records a reader will go through, found without reading them. The file is read once,
  whole: meant for indexes (about 100 bytes a video)."""
  with tf.io.gfile.GFile(path, 'rb') as handle:
    data = handle.read()
  buffer, offset, count = io.BytesIO(data), 0, 0
  while offset < len(data):
    length, problem = _header(buffer, offset, len(data), count)
    if problem:
      return count, problem
    offset += _HEADER + length + _FOOTER
    count += 1
  return count, None


def _problem_at(path, error_offset):
  """What is wrong with `path` at the offset a reader's error named (a record starting
  there, or whose data starts there), or at a header before it; None if nothing is.
  Reads only headers up to that record: cheap on long files."""
  size = _file_size(path)
  offset, index = 0, 0
  with tf.io.gfile.GFile(path, 'rb') as handle:
    while offset < size and offset < error_offset - _HEADER:
      length, problem = _header(handle, offset, size, index)
      if problem:
        return problem
      offset += _HEADER + length + _FOOTER
      index += 1
    if offset >= size or offset not in (error_offset, error_offset - _HEADER):
      return None
    length, problem = _header(handle, offset, size, index)
    if problem:
      return problem
  try:
    tf_record.tf_record_random_reader(path).read(offset)
  except tf.errors.DataLossError:
    return 'corrupted: record %d at byte %d fails its data CRC' % (index, offset)
  return None


def _with_indexes(files):
  """`files` and the index beside each shard that has one."""
  return list(files) + [path + INDEX_SUFFIX for path in files
                        if tf.io.gfile.exists(path + INDEX_SUFFIX)]


def locate(error, files):
  """The damaged files a reader's DataLossError came from: [(path, problem)], [] when
  none of `files` (nor their indexes) is damaged at the offset it names (the error came
  from elsewhere)."""
  match = _ERROR_AT.search(str(getattr(error, 'message', error)))
  if match is None:
    return []
  error_offset = int(match.group(2))
  return [(path, problem) for path in _with_indexes(files)
          for problem in [_problem_at(path, error_offset)] if problem]


def read_failure(kind, shard, start, end, video_id):
  """Graph ops: string [], the message of an assertion that a read of records by byte
  range failed. kind: 'unread' (fewer records than asked for could be read) or
  'unindexed' (the records read are not the ones the index lists); shard, video_id:
  string []; start, end: int64 [], the bytes the read covered."""
  return tf.strings.join([
      'damaged records (', kind, '): bytes ', tf.strings.as_string(start), '..',
      tf.strings.as_string(end), ' of ', shard, ' for video ', video_id])


def _problem_between(path, start, end):
  """What is wrong with the records of `path` from byte `start` (a record's start) up to
  `end`: the first header or data CRC that fails, a file that ends early; None if they
  all read."""
  if not tf.io.gfile.exists(path):
    return 'missing'
  size = _file_size(path)
  if start >= size:
    return ('truncated: the file ends at byte %d, before the records at bytes %d..%d that '
            'its index lists' % (size, start, end))
  reader = tf_record.tf_record_random_reader(path)
  offset = start
  with tf.io.gfile.GFile(path, 'rb') as handle:
    while offset < end:
      length, problem = _header(handle, offset, size, 0)
      if problem and problem.startswith('truncated'):
        return ('truncated: the file ends at byte %d, inside the records at bytes %d..%d '
                'that its index lists (a partial copy?)' % (size, start, end))
      if problem:
        return 'corrupted: the length field of the record at byte %d fails its CRC' % offset
      try:
        reader.read(offset)
      except tf.errors.DataLossError:
        return 'corrupted: the record at byte %d fails its data CRC' % offset
      offset += _HEADER + length + _FOOTER
  return None


def file_problem(path):
  """What is wrong with the TFRecord file `path`: its first record that cannot be read,
  'missing', or None when every record reads (reads the whole file)."""
  if not tf.io.gfile.exists(path):
    return 'missing'
  return next((record.problem for record in read_records(path) if record.problem), None)


def _failed_reads(message):
  """[(path, problem)] of the read_failure messages in `message` (once per shard)."""
  damaged = {}
  for kind, start, end, path, video_id in _FAILURE.findall(message):
    start, end = int(start), int(end)
    problem = _problem_between(path, start, end) if kind == 'unread' else None
    where = 'video %s, bytes %d..%d' % (video_id, start, end)
    damaged.setdefault(path, '%s; %s' % (problem, where) if problem else (
        'its records at bytes %d..%d are not the chunks of video %s its index lists' % (
            start, end, video_id)))
  return sorted(damaged.items())


def _missing(message, files):
  """[(path, 'missing')] for each of `files` (or their indexes) a NotFoundError names."""
  candidates = list(files) + [path + INDEX_SUFFIX for path in files]
  return [(path, 'missing') for path in candidates
          if path in message and not tf.io.gfile.exists(path)]


def _read_json(path):
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, 'r') as handle:
    try:
      return json.loads(handle.read())
    except ValueError:
      return None


def read_manifest(dataset_dir):
  """The video converter's manifest.json of `dataset_dir` as a dict ({} if there is none
  or it does not parse)."""
  manifest = _read_json(os.path.join(dataset_dir, MANIFEST_FILENAME))
  return manifest if isinstance(manifest, dict) else {}


def rebuild_command(shard_path):
  """The command that rebuilds the shard at `shard_path` (in its converted dataset dir).

  Video data whose manifest.json lists each shard's videos: the converter's single-shard
  mode, which rewrites just that shard. Image data: its conversion command (image
  conversions rewrite every shard, in seconds for digits). Video data converted before
  manifests listed shards: the whole conversion, into a new directory. A shard's index
  (`<shard>.index`) is rebuilt with its shard.
  """
  if shard_path.endswith(INDEX_SUFFIX):
    shard_path = shard_path[:-len(INDEX_SUFFIX)]
  dataset_dir, name = os.path.split(shard_path)
  manifest = read_manifest(dataset_dir)
  if name in (manifest.get('shard_contents') or {}):
    return 'python -m datasets.convert_videos --output_dir=%s --only_shard=%s' % (
        dataset_dir, name)
  info = _read_json(os.path.join(dataset_dir, 'dataset_info.json')) or {}
  name_flag = '--dataset_name=%s' % info.get('dataset_name', '<name>')
  if info.get('modality') or manifest:
    return ('python -m datasets.convert_videos %s --video_dir=<videos> --splits_dir=<lists> '
            '--output_dir=<a new directory> (this conversion\'s manifest.json lists no '
            'shard contents, so it cannot rebuild one shard)' % name_flag)
  count = re.search(r'-of-(\d+)$', name)
  flags = [name_flag] + ['--%s=%s' % item for item in sorted(
      (info.get('conversion') or {}).items())]
  if count:
    flags.append('--num_shards=%d' % int(count.group(1)))
  return 'python -m datasets.convert_images %s --output_dir=%s' % (' '.join(flags),
                                                                   dataset_dir)


class DamagedShards(DataError):
  """Record shards that cannot be read: one line naming each file, what is wrong with it
  and the command that rebuilds it (status 3)."""

  def __init__(self, damaged):
    self.damaged = list(damaged)      # [(path, problem)]
    parts = ['%s (%s); rebuild it with: %s' % (path, problem, rebuild_command(path))
             for path, problem in self.damaged]
    super().__init__('damaged record shard%s: %s' % (
        's' if len(parts) > 1 else '', '; '.join(parts)))


def shard_error(error, files):
  """DamagedShards for a reader's error (one of _READ_ERRORS) when one of `files` or its
  index is damaged or missing, else None (the caller re-raises `error`: it did not come
  from these shards)."""
  message = str(getattr(error, 'message', error))
  if isinstance(error, tf.errors.DataLossError):
    damaged = locate(error, files)
  elif isinstance(error, tf.errors.NotFoundError):
    damaged = _missing(message, files)
  else:
    damaged = _failed_reads(message)
  return DamagedShards(damaged) if damaged else None


@contextlib.contextmanager
def naming_damaged_shards(file_pattern):
  """Around the session runs that read the shards matching `file_pattern`: a reader's
  error (a DataLossError at an offset, a missing file, a failed read_failure assertion)
  becomes DamagedShards (one line, the rebuild commands) when one of those shards or
  their indexes is damaged or missing; any other error passes unchanged."""
  try:
    yield
  except _READ_ERRORS as error:
    damaged = shard_error(error, sorted(tf.io.gfile.glob(file_pattern)))
    if damaged is None:
      raise
    raise damaged from None
