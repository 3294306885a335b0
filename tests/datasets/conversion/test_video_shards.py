"""datasets/conversion/video_shards.py and the layout of datasets/formats/video_records.py: chunk
records and their index, checked against the file's bytes read here with the TFRecord
framing written out by hand (8-byte little-endian length, 4-byte CRC, data, 4-byte CRC)."""

import os
import struct

import pytest

from datasets.conversion import video_shards
from datasets.formats import video_records
from tf_compat import tf


def _frames(video, count):
  return [('%s-frame%03d' % (video, i)).encode() * (1 + i % 3) for i in range(count)]


def _chunked(video_id, count, chunk_frames, label=1):
  header = video_records.VideoHeader(
      modality='rgb', label=label, label_string='class1', video_id=video_id,
      data_path='c/%s.avi' % video_id, height=4, width=6, frame_rate=25.0)
  return video_shards.chunk_video(_frames(video_id, count), header, chunk_frames)


def _record_at(data, offset):
  """(serialized record starting at byte `offset`, offset after it), by the framing."""
  (length,) = struct.unpack('<Q', data[offset:offset + 8])
  return data[offset + 12:offset + 12 + length], offset + 12 + length + 4


def _index(shard):
  entries = []
  for serialized in tf.compat.v1.io.tf_record_iterator(video_records.index_path(shard)):
    feature = tf.train.Example.FromString(serialized).features.feature
    entries.append((feature['example/id'].bytes_list.value[0].decode(),
                    feature['clip/label/index'].int64_list.value[0],
                    list(feature['chunk/frame_bounds'].int64_list.value),
                    list(feature['chunk/byte_bounds'].int64_list.value)))
  return entries


def test_chunks_tile_the_video_and_the_index_addresses_them(tmp_path):
  videos = [_chunked('a', 7, 3), _chunked('b', 1, 3, label=2), _chunked('c', 6, 3)]
  shard = video_shards.write_video_shard(videos, str(tmp_path), 'train', 1, 4)
  assert os.path.basename(shard) == 'train-00001-of-00004'
  assert sorted(os.listdir(tmp_path)) == ['train-00001-of-00004',
                                          'train-00001-of-00004.index']
  with open(shard, 'rb') as handle:
    data = handle.read()
  entries = _index(shard)
  assert [(v, label, frames) for v, label, frames, _ in entries] == [
      ('a', 1, [0, 3, 6, 7]), ('b', 2, [0, 1]), ('c', 1, [0, 3, 6])]
  assert entries[0][3][0] == 0 and entries[-1][3][-1] == len(data)
  for (video_id, _, frame_bounds, byte_bounds), count in zip(entries, (7, 1, 6)):
    frames = []
    for k, offset in enumerate(byte_bounds[:-1]):
      record, end = _record_at(data, offset)
      assert end == byte_bounds[k + 1]
      example = tf.train.SequenceExample.FromString(record)
      context = example.context.feature
      assert context['example/id'].bytes_list.value == [video_id.encode()]
      assert context['clip/media_id'].bytes_list.value == [video_id.encode()]
      assert context['chunk/first_frame'].int64_list.value == [frame_bounds[k]]
      assert context['clip/num_frames'].int64_list.value == [count]
      assert context['clip/data_path'].bytes_list.value == [b'c/%s.avi' % video_id.encode()]
      frames += [f.bytes_list.value[0]
                 for f in example.feature_lists.feature_list['image/encoded'].feature]
    assert frames == _frames(video_id, count)   # byte for byte, in order


def test_flow_chunks_hold_u_and_v(tmp_path):
  pairs = [(b'u%d' % i, b'v%d' % i) for i in range(5)]
  header = video_records.VideoHeader(modality='flow', label=0, label_string='x',
                                     video_id='f', data_path='f.avi', height=2, width=2,
                                     frame_rate=0.0)
  video = video_shards.chunk_video(pairs, header, chunk_frames=2)
  shard = video_shards.write_video_shard([video], str(tmp_path), 'test', 0, 1)
  (entry, chunks), = list(video_shards.read_video_shard(shard))
  assert entry['frame_bounds'] == [0, 2, 4, 5]
  u, v = [], []
  for chunk in chunks:
    lists = tf.train.SequenceExample.FromString(chunk).feature_lists.feature_list
    u += [f.bytes_list.value[0] for f in lists['flow/u/encoded'].feature]
    v += [f.bytes_list.value[0] for f in lists['flow/v/encoded'].feature]
  assert list(zip(u, v)) == pairs


def test_reading_a_shard_its_index_does_not_describe_is_refused(tmp_path):
  shard = video_shards.write_video_shard([_chunked('a', 5, 2)], str(tmp_path), 'train', 0, 1)
  other = video_shards.write_video_shard([_chunked('a', 9, 2)], str(tmp_path / 'o'),
                                         'train', 0, 1)
  os.replace(video_records.index_path(other), video_records.index_path(shard))
  with pytest.raises(ValueError, match='train-00000-of-00001 does not hold the chunks its '
                                       'index lists for video a; rebuild the shard'):
    list(video_shards.read_video_shard(shard))


def test_bad_chunk_sizes_and_empty_videos_are_refused():
  with pytest.raises(ValueError, match='chunk_frames=0 is not accepted'):
    _chunked('a', 3, 0)
  with pytest.raises(ValueError, match='video e has no frames'):
    _chunked('e', 0, 2)
