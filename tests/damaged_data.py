"""Damage done to converted datasets the way it happens to real ones, for the tests of
issue 13's damaged data (datasets, training, evaluation, the tools).

  copy_dataset(source, destination)   a writable copy of a converted dataset directory
  truncate(path, keep)                a shard cut short, as by a partial copy
  flip_byte(path, offset)             one byte flipped: the record's CRC fails
  break_frames(shard, video, frames) frames whose JPEG bytes are cut in half, inside the
                                      chunk records of the shard's video number `video`,
                                      rewritten with valid CRCs and the index's byte bounds
                                      recomputed: the shard reads, the frames do not decode
  break_image(shard, record)          the same for an image record's PNG or JPEG
  record_offsets(path)                each record's (offset, length), from the framing
  cut_into_last_header(index)         an index cut a few bytes into its last entry's
                                      12-byte header (TensorFlow reads it, one short), and
                                      the damaged-shard line training and eval print for it
  index_entries(shard)                each video's (id, frame bounds, byte bounds) from the
                                      shard's index (`<shard>.index`, format 2)
  read_ids(shard)                     the video ids of a shard, in order
  num_frames(shard, video)            the frames of one video

Written with Python's file functions and protobuf, independently of the code under test.
"""

import os
import shutil
import struct

from tf_compat import tf

_FRAME_KEYS = {'rgb': ('image/encoded',), 'flow': ('flow/u/encoded', 'flow/v/encoded')}
_INDEX = '.index'


def copy_dataset(source, destination):
  """Copies a converted dataset directory; returns the copy's path."""
  shutil.copytree(source, destination)
  return str(destination)


def truncate(path, keep=0.5):
  """Cuts the file to `keep` of its bytes (a fraction) or to `keep` bytes (an int)."""
  size = os.path.getsize(path)
  length = keep if isinstance(keep, int) else int(size * keep)
  with open(path, 'r+b') as handle:
    handle.truncate(length)
  return length


def flip_byte(path, offset):
  """Inverts the byte at `offset` (negative: from the end)."""
  with open(path, 'r+b') as handle:
    handle.seek(offset, os.SEEK_SET if offset >= 0 else os.SEEK_END)
    position = handle.tell()
    byte = handle.read(1)
    handle.seek(position)
    handle.write(bytes([byte[0] ^ 0xFF]))


def _records(path):
  return list(tf.compat.v1.io.tf_record_iterator(path))


def index_entries(path):
  """[(video id, frame bounds, byte bounds)] of each video of shard `path`, in order, read
  from its index with protobuf."""
  entries = []
  for serialized in _records(path + _INDEX):
    features = tf.train.Example.FromString(serialized).features.feature
    entries.append((features['example/id'].bytes_list.value[0].decode(),
                    list(features['chunk/frame_bounds'].int64_list.value),
                    list(features['chunk/byte_bounds'].int64_list.value)))
  return entries


def _cut_frames(example, frames, modality):
  """Cuts the JPEGs of `frames` (indices in the chunk) of a chunk to half their bytes."""
  for key in _FRAME_KEYS[modality]:
    features = example.feature_lists.feature_list[key].feature
    for index in frames:
      jpeg = features[index].bytes_list.value[0]
      features[index].bytes_list.value[0] = jpeg[:len(jpeg) // 2]


def _rewrite_index(path, records):
  """Rewrites the index of shard `path` with each video's byte bounds recomputed from the
  sizes of `records` (its chunk records, in order): a TFRecord adds 16 bytes to each."""
  starts = [0]
  for record in records:
    starts.append(starts[-1] + len(record) + 16)
  entries = _records(path + _INDEX)
  chunk = 0
  with tf.io.TFRecordWriter(path + _INDEX) as writer:
    for serialized in entries:
      example = tf.train.Example.FromString(serialized)
      bounds = example.features.feature['chunk/byte_bounds'].int64_list.value
      count = len(bounds) - 1
      bounds[:] = starts[chunk:chunk + count + 1]
      chunk += count
      writer.write(example.SerializeToString(deterministic=True))


def break_frames(path, video, frames, modality='rgb'):
  """Rewrites shard `path` with the JPEGs of `frames` (frame numbers; 'all') of its video
  number `video` cut to half their bytes (libjpeg: 'Premature end of JPEG file'); every
  record keeps valid framing and CRCs, and the index the byte bounds of the new records.
  Returns that video's id."""
  records = _records(path)
  video_id, frame_bounds, _ = index_entries(path)[video]
  first_record = sum(len(entry[1]) - 1 for entry in index_entries(path)[:video])
  chosen = range(frame_bounds[-1]) if frames == 'all' else frames
  for k in range(len(frame_bounds) - 1):
    inside = [f - frame_bounds[k] for f in chosen if frame_bounds[k] <= f < frame_bounds[k + 1]]
    if inside:
      example = tf.train.SequenceExample.FromString(records[first_record + k])
      _cut_frames(example, inside, modality)
      records[first_record + k] = example.SerializeToString(deterministic=True)
  with tf.io.TFRecordWriter(path) as writer:
    for serialized in records:
      writer.write(serialized)
  _rewrite_index(path, records)
  return video_id


def break_image(path, record):
  """Rewrites image shard `path` with record number `record`'s image bytes cut in half."""
  records = _records(path)
  example = tf.train.Example.FromString(records[record])
  encoded = example.features.feature['image/encoded'].bytes_list.value
  encoded[0] = encoded[0][:len(encoded[0]) // 2]
  records[record] = example.SerializeToString(deterministic=True)
  with tf.io.TFRecordWriter(path) as writer:
    for serialized in records:
      writer.write(serialized)


def record_offsets(path):
  """[(offset, data length)] of each record: 8-byte length, 4-byte CRC, data, 4-byte CRC."""
  offsets, offset = [], 0
  with open(path, 'rb') as handle:
    data = handle.read()
  while offset < len(data):
    (length,) = struct.unpack('<Q', data[offset:offset + 8])
    offsets.append((offset, length))
    offset += 16 + length
  return offsets


def cut_into_last_header(index, into=5):
  """Cuts the file `index` (`<dataset>/<shard>.index`) `into` bytes into its last record's
  12-byte header; returns the `error:` line training and eval end with."""
  offsets = record_offsets(index)
  truncate(index, offsets[-1][0] + into)
  directory, name = os.path.split(index[:-len(_INDEX)])
  return ("error: damaged record shard: %s (truncated: the file ends %d bytes into record "
          "%d's 12-byte header, at byte %d); rebuild it with: python -m "
          'datasets.convert_videos --output_dir=%s --only_shard=%s' % (
              index, into, len(offsets) - 1, offsets[-1][0], directory, name))


def read_ids(path):
  """The video ids of video shard `path`, in order (from its index)."""
  return [video_id for video_id, _, _ in index_entries(path)]


def num_frames(path, video):
  """The number of frames of video number `video` of video shard `path`."""
  return index_entries(path)[video][1][-1]
