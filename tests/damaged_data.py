"""Damage done to converted datasets the way it happens to real ones, for the tests of
issue 13's damaged data (datasets, training, evaluation, the tools).

  copy_dataset(source, destination)   a writable copy of a converted dataset directory
  truncate(path, keep)                a shard cut short, as by a partial copy
  flip_byte(path, offset)             one byte flipped: the record's CRC fails
  break_frames(shard, record, frames) frames whose JPEG bytes are cut in half, inside a
                                      record rewritten with a valid CRC: the shard reads,
                                      the frames do not decode
  break_image(shard, record)          the same for an image record's PNG or JPEG
  record_offsets(path)                each record's (offset, length), from the framing
  read_ids(shard)                     the video ids of a shard's records, in order
  num_frames(shard, record)           the frames of one video record

Written with Python's file functions and protobuf, independently of the code under test.
"""

import os
import shutil
import struct

from tf_compat import tf

_FRAME_KEYS = {'rgb': ('image/encoded',), 'flow': ('flow/u/encoded', 'flow/v/encoded')}


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


def break_frames(path, record, frames, modality='rgb'):
  """Rewrites shard `path` with the JPEGs of `frames` (indices; 'all') of record number
  `record` cut to half their bytes (libjpeg: 'Premature end of JPEG file'); every
  record keeps valid framing and CRCs. Returns that record's video id."""
  records = _records(path)
  example = tf.train.SequenceExample.FromString(records[record])
  for key in _FRAME_KEYS[modality]:
    features = example.feature_lists.feature_list[key].feature
    chosen = range(len(features)) if frames == 'all' else frames
    for index in chosen:
      jpeg = features[index].bytes_list.value[0]
      features[index].bytes_list.value[0] = jpeg[:len(jpeg) // 2]
  records[record] = example.SerializeToString(deterministic=True)
  with tf.io.TFRecordWriter(path) as writer:
    for serialized in records:
      writer.write(serialized)
  return example.context.feature['example/id'].bytes_list.value[0].decode()


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


def read_ids(path):
  """The example/id of each record of a video shard, in order."""
  return [tf.train.SequenceExample.FromString(r).context.feature['example/id']
          .bytes_list.value[0].decode() for r in _records(path)]


def num_frames(path, record, modality='rgb'):
  """The number of frames of record number `record` of video shard `path`."""
  example = tf.train.SequenceExample.FromString(_records(path)[record])
  return len(example.feature_lists.feature_list[_FRAME_KEYS[modality][0]].feature)
