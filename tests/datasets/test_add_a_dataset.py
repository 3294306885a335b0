"""Adding a video dataset is one new module and one registration line (docs/architecture.md).

The module below is what a user writes for a Kinetics-style CSV list ("<class>,<video>,<split>"):
its own list parser and a VideoDatasetSpec, whose one line of names gives NAME, get_split,
convert_command and read_split_lists. Registered with one line, it converts with the real
converter and reads back through get_dataset, with nothing else edited.
"""

import os
import textwrap

import pytest

from datasets import dataset_factory
from datasets.conversion.convert_videos import VideoConversion, convert_videos
from tests.video_testdata import synthetic_videos

MODULE = textwrap.dedent('''
    """A Kinetics-style CSV list: one line "<class>,<video file>,<train|test>"."""
    import os

    from datasets.formats.dataset_split import DatasetError
    from datasets.splits.video_splits import SplitLists, VideoEntry
    from datasets.video_dataset import VideoDatasetSpec


    def read_csv_lists(splits_dir, split):
      path = os.path.join(splits_dir, 'videos.csv')
      if not os.path.isfile(path):
        raise DatasetError('%s is missing' % path)
      with open(path) as handle:
        rows = [line.strip().split(',') for line in handle if line.strip()]
      class_names = tuple(sorted({row[0] for row in rows}))
      splits = {'train': [], 'test': []}
      for class_name, video, split_name in rows:
        splits[split_name].append(VideoEntry('%s/%s' % (class_name, video), class_name,
                                             class_names.index(class_name)))
      return SplitLists(class_names, {k: tuple(v) for k, v in splits.items()})


    SPEC = VideoDatasetSpec(name='csv_videos', source_flags=('--video_dir=<tree>',),
                            read_lists=read_csv_lists, lists_dir='a directory with videos.csv',
                            list_splits=(1,))
    NAME, get_split, convert_command, read_split_lists = SPEC.declaration()
''')


@pytest.fixture
def csv_videos(tmp_path, monkeypatch):
  """The user's module, imported from a file, and a registry that forgets it afterwards."""
  package = tmp_path / 'user_datasets'
  package.mkdir()
  (package / 'csv_videos.py').write_text(MODULE)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(dataset_factory, '_REGISTRY', dict(dataset_factory._REGISTRY))  # pylint: disable=protected-access
  import importlib  # pylint: disable=import-outside-toplevel
  return importlib.import_module('user_datasets.csv_videos')


@pytest.mark.slow
def test_a_new_video_dataset_is_one_module_and_one_registration_line(
    csv_videos, tmp_path, tmp_path_factory):
  videos = synthetic_videos(tmp_path_factory)
  by_class = {}
  for relative in sorted(os.listdir(videos['video_dir'])):
    by_class[relative] = sorted(os.listdir(os.path.join(videos['video_dir'], relative)))
  lists = tmp_path / 'lists'
  lists.mkdir()
  rows = ['%s,%s,%s' % (name, video, 'test' if i == 0 else 'train')
          for name, files in by_class.items() for i, video in enumerate(files)]
  (lists / 'videos.csv').write_text('\n'.join(rows) + '\n')

  dataset_factory.register_dataset(csv_videos)  # The one registration line.

  assert 'csv_videos' in dataset_factory.list_datasets(dataset_factory.VIDEO)
  output_dir = str(tmp_path / 'records')
  manifest = convert_videos(VideoConversion(
      dataset_name='csv_videos', output_dir=output_dir, video_dir=videos['video_dir'],
      splits_dir=str(lists), short_side=32, num_processes=1, num_shards=1, progress=False))
  assert manifest['videos'] == {'test': len(by_class), 'train': len(rows) - len(by_class)}
  split = dataset_factory.get_dataset('csv_videos', 'test', output_dir)
  assert (split.num_samples, split.num_classes, split.modality) == (
      len(by_class), len(by_class), 'rgb')
  assert split.labels_to_names == dict(enumerate(sorted(by_class)))


def test_a_module_that_declares_no_dataset_is_refused(csv_videos, monkeypatch):
  monkeypatch.delattr(csv_videos, 'get_split')
  with pytest.raises(ValueError, match='user_datasets.csv_videos does not declare a dataset: '
                                       'it lacks get_split'):
    dataset_factory.register_dataset(csv_videos)


def test_the_new_module_shares_the_video_datasets_code(csv_videos):
  from datasets import hmdb51, ucf101  # pylint: disable=import-outside-toplevel
  assert csv_videos.get_split.__func__ is ucf101.get_split.__func__ is hmdb51.get_split.__func__
  assert csv_videos.convert_command('/d') == (
      'python -m datasets.convert_videos --dataset_name=csv_videos --video_dir=<tree> '
      '--output_dir=/d')
