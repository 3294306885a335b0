"""video_folder's own split keeps each source's clips on one side (issue 21, item 7).

Trees of empty files named as UCF101 names its clips (v_<Class>_gNN_cNN.avi): only names
matter to the lists. Which group a file belongs to is read here with a regular expression
of the test's own, not with the code under test.
"""

import collections
import json
import os
import re

import pytest

from datasets import dataset_factory
from datasets.conversion.convert_videos import VideoConversion, convert_videos
from datasets.formats.dataset_split import DatasetError
from datasets.splits import source_groups
from tests.video_testdata import synthetic_videos

# class: clips per group (UCF101 has 4 to 7 clips in each of 25 groups per class).
_GROUP_SIZES = {'Archery': [4, 7, 5, 6, 4, 5, 7, 4, 6, 5],
                'Bowling': [5, 4, 6, 7, 4, 5],
                'Diving': [6, 4, 5]}
_LONE = ['Bowling/my_own_clip.avi', 'Diving/another.mp4']  # no gNN: a source each


def _make_tree(root):
  for class_name, sizes in _GROUP_SIZES.items():
    (root / class_name).mkdir(parents=True)
    for group, clips in enumerate(sizes, start=1):
      for clip in range(1, clips + 1):
        (root / class_name / ('v_%s_g%02d_c%02d.avi' % (class_name, group, clip))).write_bytes(
            b'')
  for path in _LONE:
    (root / path).write_bytes(b'')
  return str(root)


def _source(relative_path):
  match = re.fullmatch(r'(\w+)/v_\w+_g(\d\d)_c\d\d\.avi', relative_path)
  return (match.group(1), match.group(2)) if match else relative_path


def _sources(entries):
  return collections.Counter(_source(entry.relative_path) for entry in entries)


def _lists(video_dir, **kwargs):
  return dataset_factory.read_split_lists('video_folder', video_dir=video_dir, **kwargs)


def test_no_source_is_in_both_splits_and_the_seed_names_the_split(tmp_path):
  video_dir = _make_tree(tmp_path / 'videos')
  lists = _lists(video_dir, test_fraction=0.3, seed=0)
  train, test = lists.splits['train'], lists.splits['test']
  assert len(train) + len(test) == sum(map(sum, _GROUP_SIZES.values())) + len(_LONE)
  assert not set(_sources(train)) & set(_sources(test))
  # 21 sources (19 groups, 2 lone clips): round(21 * 0.3) = 6 held out, by class 10/21,
  # 7/21, 4/21 of 6 -> 2.86, 2.0, 1.14 -> 3, 2, 1 (largest remainders).
  by_class = collections.Counter(key[0] if isinstance(key, tuple) else key.split('/')[0]
                                 for key in _sources(test))
  assert by_class == {'Archery': 3, 'Bowling': 2, 'Diving': 1}
  assert lists.groups == source_groups.GroupCounts(source_groups.DEFAULT_GROUP_BY, 15, 6, 2)
  assert lists.groups.line() == (
      r'split by source (--group_by=_g(\d+)_): train 15 groups, test 6 groups, none in both; '
      '2 videos matched no group (each its own)')
  # A group's clips stay together in the seeded order the records are written in.
  runs = [key for index, key in enumerate(map(_source, (e.relative_path for e in test)))
          if index == 0 or key != _source(test[index - 1].relative_path)]
  assert len(runs) == len(set(runs)) == 6
  assert _lists(video_dir, test_fraction=0.3, seed=0) == lists
  others = [_lists(video_dir, test_fraction=0.3, seed=seed) for seed in (1, 2, 3)]
  assert any(set(_sources(o.splits['test'])) != set(_sources(test)) for o in others)
  for other in others:
    assert not set(_sources(other.splits['train'])) & set(_sources(other.splits['test']))


def test_an_empty_group_by_splits_single_videos_and_a_pattern_of_ones_own(tmp_path):
  video_dir = _make_tree(tmp_path / 'videos')
  single = _lists(video_dir, test_fraction=0.3, seed=0, group_by='')
  assert len(single.splits['test']) == int(0.3 * 101 + 0.5) == 30  # 53 + 32 + 16 videos
  assert single.groups.line() == ('split by single videos (--group_by is empty): train 71, '
                                  'test 30 videos')
  # What the split was before --group_by: clips of one source on both sides.
  assert set(_sources(single.splits['train'])) & set(_sources(single.splits['test']))
  # Each clip's number as its source: the tree's groups are cut through again.
  by_clip = _lists(video_dir, test_fraction=0.3, seed=0, group_by=r'_c(\d+)\.')
  assert by_clip.groups.train + by_clip.groups.test == 7 + 7 + 6 + 2
  assert set(_sources(by_clip.splits['train'])) & set(_sources(by_clip.splits['test']))


@pytest.mark.parametrize('group_by', ['_g(\\d+', '[', 3])
def test_a_bad_pattern_is_one_line_naming_the_flag(tmp_path, group_by):
  video_dir = _make_tree(tmp_path / 'videos')
  with pytest.raises(DatasetError, match=r'^--group_by=%s is not accepted: '
                     % re.escape(str(group_by) if isinstance(group_by, str) else repr(group_by))):
    _lists(video_dir, group_by=group_by)


def test_published_lists_ignore_group_by_and_so_does_a_resume_check():
  listed = VideoConversion(dataset_name='video_folder', splits_dir='lists', group_by='x')
  assert 'group_by' not in listed.settings()
  assert 'group_by' not in VideoConversion(dataset_name='ucf101').settings()
  own = VideoConversion(dataset_name='video_folder', group_by='x')
  assert own.settings()['group_by'] == 'x'


@pytest.mark.slow
def test_the_converter_logs_and_records_where_the_groups_went(tmp_path, tmp_path_factory,
                                                              capsys):
  videos = synthetic_videos(tmp_path_factory)  # 3 classes x 2 groups of 2 clips
  manifest = convert_videos(VideoConversion(
      dataset_name='video_folder', video_dir=videos['video_dir'], output_dir=str(tmp_path),
      short_side=32, num_processes=2, num_shards=1, progress=False, test_fraction=0.3))
  assert capsys.readouterr().err.splitlines() == [
      r'split by source (--group_by=_g(\d+)_): train 4 groups, test 2 groups, none in both; '
      '0 videos matched no group (each its own)']
  assert manifest['groups'] == {'group_by': source_groups.DEFAULT_GROUP_BY, 'train': 4,
                                'test': 2, 'ungrouped': 0}
  with open(os.path.join(tmp_path, 'manifest.json')) as handle:
    contents = json.load(handle)['shard_contents']
  paths = {split: {v['path'] for name, shard in contents.items() if name.startswith(split)
                   for v in shard['videos']} for split in ('train', 'test')}
  assert len(paths['train']) + len(paths['test']) == len(videos['videos'])
  assert not {_source(p) for p in paths['train']} & {_source(p) for p in paths['test']}
