"""Shard names and finding one complete set of a split's shards (files made by hand)."""

import os

import pytest

from datasets.formats import shards


def _touch(directory, *names):
  for name in names:
    (directory / name).write_bytes(b'')


def test_names_parse_back():
  assert shards.shard_name('train', 3, 12) == 'train-00003-of-00012'
  assert shards.parse_shard_name('train-00003-of-00012') == ('train', 3, 12)
  assert shards.parse_shard_name('train-00003-of-00012' + shards.INDEX_SUFFIX) is None


def test_find_shards_detects_incomplete_sets(tmp_path):
  assert shards.find_shards(str(tmp_path), 'train') == []
  _touch(tmp_path, 'train-00000-of-00003', 'train-00002-of-00003', 'test-00000-of-00001',
         'train-00000-of-00003' + shards.INDEX_SUFFIX)
  with pytest.raises(ValueError, match='missing train-00001-of-00003'):
    shards.find_shards(str(tmp_path), 'train')
  _touch(tmp_path, 'train-00001-of-00003')
  assert shards.find_shards(str(tmp_path), 'train') == [
      os.path.join(str(tmp_path), 'train-%05d-of-00003' % i) for i in range(3)]
  _touch(tmp_path, 'train-00000-of-00005')
  with pytest.raises(ValueError, match='different runs'):
    shards.find_shards(str(tmp_path), 'train')
