"""Contiguous contents, atomic writes and stale-shard clean-up (names: formats/test_shards)."""

import os

import pytest

from datasets.conversion import shard_writer
from datasets.formats import shards
from tf_compat import tf


def _contents(path):
  return list(tf.io.tf_record_iterator(path))


def _records(count):
  return [b'record-%02d' % i for i in range(count)]


def test_names_and_contiguous_chunks(tmp_path):
  records = _records(10)
  paths = shard_writer.write_shards(records, str(tmp_path), 'train', 4)
  names = [os.path.basename(p) for p in paths]
  assert names == ['train-00000-of-00004', 'train-00001-of-00004',
                   'train-00002-of-00004', 'train-00003-of-00004']
  chunks = [_contents(p) for p in paths]
  # Shard i holds records [i*n//N, (i+1)*n//N): sizes 2, 3, 2, 3, in order.
  assert [len(c) for c in chunks] == [2, 3, 2, 3]
  assert [r for chunk in chunks for r in chunk] == records
  assert sorted(os.listdir(tmp_path)) == names  # no temporary files left
  assert shards.find_shards(str(tmp_path), 'train') == paths
  assert sorted(tf.io.gfile.glob(shards.shard_file_pattern(str(tmp_path), 'train', 4))
                ) == paths


def test_iterator_needs_num_records(tmp_path):
  with pytest.raises(ValueError, match='num_records is required'):
    shard_writer.write_shards(iter(_records(3)), str(tmp_path), 'train', 2)
  paths = shard_writer.write_shards(iter(_records(3)), str(tmp_path), 'train', 2,
                                    num_records=3)
  assert [len(_contents(p)) for p in paths] == [1, 2]


def _failing_records(good):
  for record in _records(good):
    yield record
  raise RuntimeError('disk on fire')


def test_failure_mid_write_leaves_no_partial_shard(tmp_path):
  with pytest.raises(RuntimeError, match='disk on fire'):
    shard_writer.write_shards(_failing_records(5), str(tmp_path), 'train', 3, num_records=9)
  # Shard 0 (records 0-2) was complete and renamed; shard 1 failed after 2 of its 3
  # records and must not exist under its final name, nor as a temporary file.
  assert sorted(os.listdir(tmp_path)) == ['train-00000-of-00003']
  assert _contents(str(tmp_path / 'train-00000-of-00003')) == _records(3)


def test_failure_in_first_shard_leaves_nothing(tmp_path):
  with pytest.raises(RuntimeError):
    shard_writer.write_shards(_failing_records(1), str(tmp_path), 'test', 2, num_records=6)
  assert os.listdir(tmp_path) == []


def test_short_or_long_iterables_are_refused(tmp_path):
  with pytest.raises(ValueError, match='ran out'):
    shard_writer.write_shards(iter(_records(3)), str(tmp_path), 'a', 2, num_records=4)
  with pytest.raises(ValueError, match='more than num_records'):
    shard_writer.write_shards(iter(_records(5)), str(tmp_path), 'b', 2, num_records=4)
  leftovers = [n for n in os.listdir(tmp_path) if n.startswith(('a-00001', 'b-00001', '.'))]
  assert leftovers == []


def test_rerun_with_other_count_removes_stale_shards(tmp_path):
  shard_writer.write_shards(_records(8), str(tmp_path), 'train', 4)
  shard_writer.write_shards(_records(8), str(tmp_path), 'test', 2)
  paths = shard_writer.write_shards(_records(6), str(tmp_path), 'train', 2)
  assert sorted(os.listdir(tmp_path)) == ['test-00000-of-00002', 'test-00001-of-00002',
                                          'train-00000-of-00002', 'train-00001-of-00002']
  assert [r for p in paths for r in _contents(p)] == _records(6)


@pytest.mark.parametrize('split_name, num_shards, message', [
    ('tr-ain', 1, 'no "-"'), ('train', 0, 'from 1 to 99999'), ('train', 100000, 'from 1')])
def test_bad_arguments(tmp_path, split_name, num_shards, message):
  with pytest.raises(ValueError, match=message):
    shard_writer.write_shards(_records(2), str(tmp_path), split_name, num_shards)
  assert os.listdir(tmp_path) == []
