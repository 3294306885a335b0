"""Rebuilding one damaged shard (`python -m datasets.convert_videos --only_shard`'s work) on
a copy of the shared synthetic records, the shard and its index compared byte for byte
with the ones the conversion wrote; its refusals; and the manifest it reads (source paths,
each shard's videos and the SHA-256s of the shard and its index) against the records
themselves, read back with protobuf and hashlib."""

import dataclasses
import hashlib
import json
import os
import re
import shutil

import pytest

from core.errors import DataError
from datasets.conversion import shard_rebuild
from datasets.conversion.convert_videos_config import VideoConversion
from datasets.formats.dataset_split import DatasetError
from tests import damaged_data, video_testdata

SHARD = 'train-00001-of-00002'


@pytest.fixture(scope='module')
def original(tmp_path_factory):
  return video_testdata.converted(tmp_path_factory, 'rgb')


def _read(path):
  with open(path, 'rb') as handle:
    return handle.read()


def test_the_manifest_lists_each_shards_videos_and_sources(original, tmp_path_factory):
  with open(os.path.join(original, 'manifest.json')) as handle:
    manifest = json.load(handle)
  videos = video_testdata.synthetic_videos(tmp_path_factory)
  assert manifest['source'] == {'video_dir': os.path.abspath(videos['video_dir']),
                                'frames_dir': None,
                                'splits_dir': os.path.abspath(videos['split_dir'])}
  shards = sorted(name for name in os.listdir(original)
                  if '-of-' in name and not name.endswith('.index'))
  assert sorted(manifest['shard_contents']) == shards
  for name in shards:
    listed = manifest['shard_contents'][name]
    path = os.path.join(original, name)
    assert [v['id'] for v in listed['videos']] == damaged_data.read_ids(path)
    assert listed['sha256'] == hashlib.sha256(_read(path)).hexdigest()
    assert listed['index_sha256'] == hashlib.sha256(_read(path + '.index')).hexdigest()
    for video in listed['videos']:
      assert os.path.isfile(os.path.join(videos['video_dir'], video['path']))


def test_only_shard_rewrites_a_truncated_shard_and_its_index_byte_for_byte(original,
                                                                           tmp_path):
  """What `python -m datasets.convert_videos --output_dir=DIR --only_shard=NAME` runs (its
  main calls rebuild_shard and prints summary_line), here in-process."""
  copy = damaged_data.copy_dataset(original, tmp_path / 'rgb')
  damaged_data.truncate(os.path.join(copy, SHARD), 0.5)
  os.remove(os.path.join(copy, SHARD + '.index'))
  others = {name: _read(os.path.join(copy, name)) for name in os.listdir(copy)
            if name != SHARD and os.path.isfile(os.path.join(copy, name))}
  result = shard_rebuild.rebuild_shard(_conversion(copy))
  expected = _read(os.path.join(original, SHARD))
  assert _read(os.path.join(copy, SHARD)) == expected
  assert (_read(os.path.join(copy, SHARD + '.index')) ==
          _read(os.path.join(original, SHARD + '.index')))
  videos = len(damaged_data.read_ids(os.path.join(original, SHARD)))
  frames = sum(damaged_data.num_frames(os.path.join(original, SHARD), i) for i in range(videos))
  assert shard_rebuild.summary_line(result) == (
      'rebuilt %s and its index: %d videos, %d frames; byte-identical to the original '
      'conversion (sha256 %s)' % (os.path.join(copy, SHARD), videos, frames,
                                  hashlib.sha256(expected).hexdigest()))
  after = {name for name in os.listdir(copy) if os.path.isfile(os.path.join(copy, name))}
  assert after == set(others) | {SHARD, SHARD + '.index'}   # no temporary file left
  assert all(_read(os.path.join(copy, name)) == data for name, data in others.items())


def _conversion(output_dir, **overrides):
  return dataclasses.replace(VideoConversion(output_dir=output_dir, only_shard=SHARD,
                                             num_processes=1, progress=False), **overrides)


@pytest.mark.parametrize('overrides, message', [
    (dict(only_shard='train-00007-of-00009'),
     'is not a shard of .*; valid: test-00000-of-00002, test-00001-of-00002, train-'),
    (dict(short_side=64), '--short_side=64 differs from the conversion in .* \\(32\\)'),
    (dict(video_dir='/nonexistent'), '--video_dir=/nonexistent is not a directory'),
])
def test_refusals_name_the_flag(original, tmp_path, overrides, message):
  copy = damaged_data.copy_dataset(original, tmp_path / 'rgb')
  with pytest.raises(DatasetError, match=message):
    shard_rebuild.rebuild_shard(_conversion(copy, **overrides))


def test_records_of_an_older_format_are_refused_with_the_migration_command(original,
                                                                          tmp_path):
  copy = damaged_data.copy_dataset(original, tmp_path / 'rgb')
  info_path = os.path.join(copy, 'dataset_info.json')
  with open(info_path) as handle:
    info = json.load(handle)
  del info['format_version']   # as format 1 wrote it
  with open(info_path, 'w') as handle:
    json.dump(info, handle)
  before = _read(os.path.join(copy, SHARD))
  with pytest.raises(DataError, match='format 1 .* migrate them with: python -m '
                                      'datasets.migrate_video_records --dataset_dir=%s'
                                      % re.escape(copy)):
    shard_rebuild.rebuild_shard(_conversion(copy))
  assert _read(os.path.join(copy, SHARD)) == before


@pytest.mark.slow
def test_a_source_that_no_longer_converts_leaves_the_shard_as_it_was(
    original, tmp_path, tmp_path_factory):
  videos = shutil.copytree(video_testdata.synthetic_videos(tmp_path_factory)['video_dir'],
                           tmp_path / 'videos')
  copy = damaged_data.copy_dataset(original, tmp_path / 'rgb')
  with open(os.path.join(copy, 'manifest.json')) as handle:
    listed = json.load(handle)['shard_contents'][SHARD]['videos']
  (videos / listed[-1]['path']).write_bytes(b'not a video any more')
  damaged_data.truncate(os.path.join(copy, SHARD), 0.5)
  before = _read(os.path.join(copy, SHARD))
  with pytest.raises(DataError, match='its video %s no longer converts' % listed[-1]['path']):
    shard_rebuild.rebuild_shard(_conversion(copy, video_dir=str(videos)))
  assert _read(os.path.join(copy, SHARD)) == before
