"""datasets/conversion/migrate_video_records.py: format-1 video records (one SequenceExample per
whole video, written by hand with the keys that format used: tests/video_testdata.py)
rewritten as chunked records with an index: frames byte for byte, resumable, nothing
half-written left behind."""

import filecmp
import hashlib
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from core.errors import ConfigError, DataError
from datasets import dataset_factory
from datasets.conversion import migrate_video_records as migration
from datasets.conversion.migrate_video_records import RecordMigration, migrate_video_records
from datasets.inputs import clip_input
from datasets.inputs.input_settings import InputSettings, Sampling
from tests import video_testdata as vt
from tf_compat import tf

def _snapshot(directory):
  return {name: open(os.path.join(directory, name), 'rb').read()
          for name in sorted(os.listdir(directory))}


@pytest.mark.parametrize('modality', ['rgb', 'flow'])
def test_frames_and_context_are_carried_over_byte_for_byte(tmp_path, modality):
  old, new = str(tmp_path / 'old'), str(tmp_path / 'new')
  frames = vt.write_format1_dataset(old, modality)
  before = _snapshot(old)
  summary = migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new,
                                                  chunk_frames=4))
  assert summary['shards'] == {'written': 3, 'kept': 0}
  assert _snapshot(old) == before   # only read
  keys = ['image/encoded'] if modality == 'rgb' else ['flow/u/encoded', 'flow/v/encoded']
  for split, shards in vt.FORMAT1_SHARDS.items():
    videos = vt.whole_videos(new, split)
    assert sorted(videos) == sorted(v for shard in shards for v, _, _ in shard)
    for video_id, example in videos.items():
      lists = [[f.bytes_list.value[0] for f in example.feature_lists.feature_list[k].feature]
               for k in keys]
      assert (lists[0] if modality == 'rgb' else list(zip(*lists))) == frames[video_id]
      old_example = tf.train.SequenceExample.FromString(vt.format1_record(
          video_id, example.context.feature['clip/label/index'].int64_list.value[0],
          frames[video_id], modality))
      for key, value in old_example.context.feature.items():
        assert example.context.feature[key] == value, key
  with open(os.path.join(new, 'dataset_info.json')) as handle:
    info = json.load(handle)
  assert info['format_version'] == 2 and info['chunk_frames'] == 4
  assert info['splits'] == {'train': 3, 'test': 2} and info['modality'] == modality
  assert open(os.path.join(new, 'manifest.json')).read() == before['manifest.json'].decode()
  assert sorted(n for n in os.listdir(new) if n.startswith('train')) == [
      'train-00000-of-00002', 'train-00000-of-00002.index', 'train-00001-of-00002',
      'train-00001-of-00002.index']


def test_the_migrated_data_trains_and_evaluates(tmp_path):
  old, new = str(tmp_path / 'old'), str(tmp_path / 'new')
  frames = vt.write_format1_dataset(old)
  migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new, chunk_frames=4))
  split = dataset_factory.get_dataset('video_folder', 'test', new)
  with tf.Graph().as_default(), tf.Session() as sess:
    dataset = clip_input.build_clip_dataset(split, InputSettings.for_sampling(
        Sampling.first_frames(6, 16), batch_size=2, deferred=True), is_training=False)
    clips, labels, ids = sess.run(tf.data.make_one_shot_iterator(dataset).get_next())
  for clip, video_id in zip(clips, ids):
    first = np.asarray(Image.open(io.BytesIO(frames[video_id.decode()][0])))[:, 2:18]
    np.testing.assert_array_equal(clip[0], first)   # the same decoder, the same pixels
  assert labels.tolist() == [0, 1]


def test_a_manifest_that_can_rebuild_shards_describes_the_new_ones(tmp_path):
  """A conversion that recorded its settings and each shard's SHA-256 (for --only_shard):
  after the migration they are the new shard's, index's and chunk size."""
  old, new = str(tmp_path / 'old'), str(tmp_path / 'new')
  vt.write_format1_dataset(old)
  contents = {'train-00000-of-00002': {'split': 'train', 'sha256': 'old', 'videos': []},
              'test-00000-of-00001': {'split': 'test', 'sha256': 'old', 'videos': []}}
  with open(os.path.join(old, 'manifest.json'), 'w') as handle:
    json.dump({'settings': {'modality': 'rgb', 'fps': None}, 'shard_contents': contents},
              handle)
  migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new, chunk_frames=3))
  with open(os.path.join(new, 'manifest.json')) as handle:
    manifest = json.load(handle)
  assert manifest['settings'] == {'modality': 'rgb', 'fps': None, 'chunk_frames': 3}
  for name in contents:
    with open(os.path.join(new, name), 'rb') as shard, \
        open(os.path.join(new, name + '.index'), 'rb') as index:
      assert manifest['shard_contents'][name] == dict(
          contents[name], sha256=hashlib.sha256(shard.read()).hexdigest(),
          index_sha256=hashlib.sha256(index.read()).hexdigest())


def test_an_interrupted_migration_leaves_no_dataset_and_resumes(tmp_path, monkeypatch):
  old = str(tmp_path / 'old')
  vt.write_format1_dataset(old)
  clean = str(tmp_path / 'clean')
  migrate_video_records(RecordMigration(dataset_dir=old, output_dir=clean))
  chunked = migration._chunked_videos   # pylint: disable=protected-access
  calls = []

  def crash_in_the_second_shard(*args):
    calls.append(args)
    for number, video in enumerate(chunked(*args)):
      if len(calls) == 2 and number == 0:
        raise KeyboardInterrupt   # killed while writing the second shard
      yield video

  monkeypatch.setattr(migration, '_chunked_videos', crash_in_the_second_shard)
  new = str(tmp_path / 'new')
  with pytest.raises(KeyboardInterrupt):
    migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new))
  assert sorted(os.listdir(new)) == ['migration.json', 'test-00000-of-00001',
                                     'test-00000-of-00001.index']   # no half shard, no info
  with pytest.raises(ConfigError, match='holds a migration of .* with chunk_frames=8; use a '
                                        'new --output_dir'):
    migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new, chunk_frames=3))
  monkeypatch.setattr(migration, '_chunked_videos', chunked)
  summary = migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new))
  assert summary['shards'] == {'written': 2, 'kept': 1}
  names = sorted(os.listdir(clean))
  assert names == sorted(os.listdir(new))
  for name in names:
    assert filecmp.cmp(os.path.join(clean, name), os.path.join(new, name), shallow=False), name


def test_what_needs_no_migration_or_cannot_be_read_is_one_line(tmp_path):
  old, new = str(tmp_path / 'old'), str(tmp_path / 'new')
  vt.write_format1_dataset(old)
  with pytest.raises(ConfigError, match='must be a new directory outside'):
    migrate_video_records(RecordMigration(dataset_dir=old, output_dir=old + '/inside'))
  migrate_video_records(RecordMigration(dataset_dir=old, output_dir=new))
  with pytest.raises(ConfigError, match='already holds format 2 records: nothing to migrate'):
    migrate_video_records(RecordMigration(dataset_dir=new, output_dir=str(tmp_path / 'x')))
  shard = os.path.join(old, 'train-00001-of-00002')
  data = open(shard, 'rb').read()
  with open(shard, 'wb') as handle:
    handle.write(data[:len(data) // 2])   # a partial copy
  with pytest.raises(DataError, match='train-00001-of-00002 cannot be read .*; re-run the '
                                      'conversion that wrote it'):
    migrate_video_records(RecordMigration(dataset_dir=old, output_dir=str(tmp_path / 'y')))
