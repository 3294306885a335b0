"""The count of a split's index entries against dataset_info.json (check_index_counts), on
copies of tests/video_testdata.py's records damaged by tests/damaged_data.py. The entries
and offsets expected are read with tests/damaged_data.py's own framing reader."""

import os

import pytest

from core.errors import DataError
from datasets import dataset_factory
from datasets.checks.index_check import check_index_counts
from datasets.formats import damaged_shards
from tests import damaged_data, video_testdata
from tf_compat import tf

SHARD = 'train-00000-of-00002'


@pytest.fixture
def copied(tmp_path_factory, tmp_path):
  """(a writable copy of the rgb records, the index of its first train shard)."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  return directory, os.path.join(directory, SHARD) + '.index'


def _train(directory):
  return dataset_factory.get_dataset('video_folder', 'train', directory)


def test_an_intact_dataset_passes(copied, digits_dir):
  directory, _ = copied
  for split_name in ('train', 'test'):
    check_index_counts(dataset_factory.get_dataset('video_folder', split_name, directory))
  check_index_counts(dataset_factory.get_dataset('digits', 'train', digits_dir))  # no index


def test_an_index_cut_into_a_header_is_named_with_its_rebuild_command(copied):
  directory, index = copied
  entries = damaged_data.record_offsets(index)
  last = entries[-1][0]
  damaged_data.truncate(index, last + 5)
  # Why the count is needed: TensorFlow's reader takes the partial header for the end.
  assert len(list(tf.compat.v1.io.tf_record_iterator(index))) == len(entries) - 1
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    check_index_counts(_train(directory))
  assert str(raised.value) == (
      "damaged record shard: %s (truncated: the file ends 5 bytes into record %d's 12-byte "
      'header, at byte %d); rebuild it with: python -m datasets.convert_videos '
      '--output_dir=%s --only_shard=%s' % (index, len(entries) - 1, last, directory, SHARD))


def test_an_index_cut_between_entries_is_named_from_the_manifest(copied):
  directory, index = copied
  entries = damaged_data.record_offsets(index)
  damaged_data.truncate(index, entries[-1][0])
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    check_index_counts(_train(directory))
  assert str(raised.value) == (
      'damaged record shard: %s (its %d entries are not the %d videos manifest.json lists for '
      "the shard (cut at an entry's end?)); rebuild it with: python -m datasets.convert_videos "
      '--output_dir=%s --only_shard=%s' % (index, len(entries) - 1, len(entries), directory,
                                           SHARD))
  # Without a manifest only the total tells.
  os.remove(os.path.join(directory, 'manifest.json'))
  split = _train(directory)
  with pytest.raises(DataError) as raised:
    check_index_counts(split)
  assert str(raised.value) == (
      '%s counts %d train videos, but the indexes of its shards list %d; python -m '
      'datasets.verify_records --dataset_dir=%s names the damaged shard' % (
          os.path.join(directory, 'dataset_info.json'), split.num_samples,
          split.num_samples - 1, directory))


def test_a_missing_index_is_named(copied):
  directory, index = copied
  os.remove(index)
  with pytest.raises(damaged_shards.DamagedShards, match=r'^damaged record shard: %s '
                     r'\(missing\); rebuild it with: ' % index):
    check_index_counts(_train(directory))
