"""Conversion across machines (issue 13, item 5): two tasks sharing one output directory
write the records one task writes, byte for byte; the last to finish writes the manifest and
dataset_info.json; a Kubernetes Indexed Job's index is taken from its variable."""

import filecmp
import os

import pytest

from datasets.conversion.convert_videos import convert_videos, summary_line
from datasets.conversion.convert_videos_config import (VideoConversion,
                                                         with_task_from_environment)
from datasets.formats.dataset_split import DatasetError
from tests.video_testdata import synthetic_videos


def _conversion(videos, output_dir, **task):
  return VideoConversion(dataset_name='video_folder', output_dir=str(output_dir),
                         video_dir=videos['video_dir'], splits_dir=videos['split_dir'],
                         short_side=32, num_processes=2, num_shards=3, progress=False,
                         **task)


@pytest.mark.slow
def test_two_tasks_write_the_records_of_one(tmp_path, tmp_path_factory):
  videos = synthetic_videos(tmp_path_factory)
  one = convert_videos(_conversion(videos, tmp_path / 'one'))
  second = convert_videos(_conversion(videos, tmp_path / 'two', num_conversion_tasks=2,
                                      conversion_task_index=1))
  assert 'pending_shards' in second and not os.path.exists(tmp_path / 'two' / 'manifest.json')
  assert summary_line(second, 'OUT').startswith('conversion task 1 of 2: its 3 shards are in OUT')
  first = convert_videos(_conversion(videos, tmp_path / 'two', num_conversion_tasks=2,
                                     conversion_task_index=0))
  assert first == one  # the last task writes the merged manifest
  names = sorted(n for n in os.listdir(tmp_path / 'one') if '-of-' in n)
  assert names == sorted(n for n in os.listdir(tmp_path / 'two') if '-of-' in n)
  assert len(names) == 12  # 6 shards, each with its index
  for name in names + ['manifest.json', 'labels.txt', 'dataset_info.json']:
    assert filecmp.cmp(tmp_path / 'one' / name, tmp_path / 'two' / name, shallow=False), name


def test_the_task_index_comes_from_the_indexed_job_variable(tmp_path):
  conversion = VideoConversion(output_dir=str(tmp_path), num_conversion_tasks=4)
  assert with_task_from_environment(conversion, {}).conversion_task_index is None
  assert with_task_from_environment(
      conversion, {'JOB_COMPLETION_INDEX': '3'}).conversion_task_index == 3
  given = VideoConversion(conversion_task_index=1, num_conversion_tasks=4)
  assert with_task_from_environment(given, {'JOB_COMPLETION_INDEX': '3'}) == given


def test_an_index_outside_the_tasks_is_one_line(tmp_path, tmp_path_factory):
  videos = synthetic_videos(tmp_path_factory)
  with pytest.raises(DatasetError, match=r'^--conversion_task_index=2 must be in 0\.\.1 '
                                         r'\(--num_conversion_tasks=2; or set '):
    convert_videos(_conversion(videos, tmp_path / 'x', num_conversion_tasks=2,
                               conversion_task_index=2))
