"""Damaged shards found and described: files written with TFRecordWriter and damaged with
Python's file functions; record offsets computed here from the framing (8-byte length,
4-byte CRC, data, 4-byte CRC); the errors are TensorFlow's own reader's."""

import json
import os

import pytest

from datasets.formats import damaged_shards
from tests import damaged_data
from tf_compat import tf

RECORDS = [bytes([i]) * (100 + 50 * i) for i in range(4)]


@pytest.fixture
def shard(tmp_path):
  path = str(tmp_path / 'train-00000-of-00001')
  with tf.io.TFRecordWriter(path) as writer:
    for record in RECORDS:
      writer.write(record)
  return path


def _offsets():
  offsets, offset = [], 0
  for record in RECORDS:
    offsets.append(offset)
    offset += 16 + len(record)
  return offsets


def test_an_intact_shard_reads_whole(shard):
  records = list(damaged_shards.read_records(shard))
  assert [(r.index, r.offset, r.data, r.problem) for r in records] == [
      (i, offset, data, None) for i, (offset, data) in enumerate(zip(_offsets(), RECORDS))]


def test_a_cut_shard_ends_at_the_record_it_cuts(shard):
  offsets = _offsets()
  damaged_data.truncate(shard, offsets[2] + 40)
  *read, last = damaged_shards.read_records(shard)
  assert [r.data for r in read] == RECORDS[:2]
  assert last.problem == ('truncated: record 2 at byte %d needs %d bytes, the file ends '
                          'after 40 (%d bytes short: a partial copy?)'
                          % (offsets[2], 16 + len(RECORDS[2]), 16 + len(RECORDS[2]) - 40))


def test_a_flipped_data_byte_costs_its_record_only(shard):
  offsets = _offsets()
  damaged_data.flip_byte(shard, offsets[1] + 12 + 5)
  records = list(damaged_shards.read_records(shard))
  assert [r.problem for r in records] == [
      None, 'corrupted: record 1 at byte %d fails its data CRC' % offsets[1], None, None]
  assert [r.data for r in records if r.data] == [RECORDS[0]] + RECORDS[2:]


def test_a_flipped_length_ends_the_file(shard):
  offsets = _offsets()
  damaged_data.flip_byte(shard, offsets[2] + 1)
  records = list(damaged_shards.read_records(shard))
  assert len(records) == 3 and records[2].problem == (
      "corrupted: record 2's length field (byte %d) fails its CRC; nothing after it can be "
      'read' % offsets[2])


def _reader_error(files):
  with tf.Graph().as_default(), tf.Session() as sess:
    get_next = tf.data.make_one_shot_iterator(tf.data.TFRecordDataset(files)).get_next()
    with pytest.raises(tf.errors.DataLossError) as raised:
      while True:
        sess.run(get_next)
  return raised.value


@pytest.mark.parametrize('damage', ['truncate', 'flip'])
def test_the_reader_error_is_traced_to_its_file(shard, tmp_path, damage):
  intact = str(tmp_path / 'train-00000-of-00002')
  with tf.io.TFRecordWriter(intact) as writer:
    for record in RECORDS:
      writer.write(record)
  offsets = _offsets()
  if damage == 'truncate':
    damaged_data.truncate(shard, offsets[3] + 30)   # inside its data
  else:
    damaged_data.flip_byte(shard, offsets[3] + 20)
  error = _reader_error([intact, shard])
  assert 'at %d' % (offsets[3] + (12 if damage == 'flip' else 0)) in str(error)
  [(path, problem)] = damaged_shards.locate(error, [intact, shard])
  assert path == shard and problem.startswith('truncated' if damage == 'truncate'
                                              else 'corrupted: record 3')
  assert damaged_shards.locate(error, [intact]) == []
  message = str(damaged_shards.shard_error(error, [intact, shard]))
  assert message.startswith('damaged record shard: %s (%s); rebuild it with: python -m '
                            'datasets.convert_images' % (shard, problem))


def test_rebuild_commands(tmp_path, digits_dir):
  video = tmp_path / 'video'
  video.mkdir()
  (video / 'manifest.json').write_text(json.dumps(
      {'shard_contents': {'train-00001-of-00002': {'videos': []}}}))
  assert damaged_shards.rebuild_command(str(video / 'train-00001-of-00002')) == (
      'python -m datasets.convert_videos --output_dir=%s --only_shard=train-00001-of-00002'
      % video)
  (video / 'manifest.json').write_text(json.dumps({'videos': {}}))   # an older conversion
  assert damaged_shards.rebuild_command(str(video / 'train-00001-of-00002')).startswith(
      'python -m datasets.convert_videos --dataset_name=<name> --video_dir=<videos>')
  assert damaged_shards.rebuild_command(os.path.join(digits_dir, 'test-00002-of-00004')) == (
      'python -m datasets.convert_images --dataset_name=digits --num_shards=4 '
      '--output_dir=%s' % digits_dir)
  folder = tmp_path / 'folder'
  folder.mkdir()
  (folder / 'dataset_info.json').write_text(json.dumps(
      {'dataset_name': 'image_folder', 'num_classes': 2, 'num_channels': 3, 'splits': {},
       'conversion': {'image_dir': '/photos', 'test_fraction': 0.25, 'seed': 3}}))
  assert damaged_shards.rebuild_command(str(folder / 'train-00000-of-00002')) == (
      'python -m datasets.convert_images --dataset_name=image_folder --image_dir=/photos '
      '--seed=3 --test_fraction=0.25 --num_shards=2 --output_dir=%s' % folder)
