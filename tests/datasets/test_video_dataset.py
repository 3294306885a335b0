"""Video dataset modules over converted data: sizes, classes, modality, and their errors."""

import json
import os

import pytest

from datasets import dataset_factory
from datasets.conversion import convert_images, shard_writer
from datasets.formats import converted_data
from datasets.conversion.convert_images import ImageConversion
from datasets.formats.dataset_split import DatasetError
from tests import entries

_VIDEO_DATASETS = ('hmdb51', 'ucf101', 'video_folder')


def _write_converted(output_dir, name, num_classes, modality, sizes, extra=None):
  """Converted data whose shards hold placeholder records: get_split never reads them."""
  class_names = ['class_%03d' % label for label in range(num_classes)]
  splits = {split_name: ([b'placeholder clip'] * size, size)
            for split_name, size in sizes.items()}
  shard_writer.write_converted_dataset(
      str(output_dir), name, class_names, converted_data.MODALITY_CHANNELS[modality], splits,
      num_shards=2, modality=modality, extra=extra)
  return str(output_dir)


def _one_line(error_info):
  message = str(error_info.value)
  assert '\n' not in message
  return message


@pytest.mark.parametrize('name, num_classes, modality, channels', [
    ('ucf101', 101, 'rgb', 3), ('ucf101', 101, 'flow', 2), ('hmdb51', 51, 'rgb', 3),
    ('hmdb51', 51, 'flow', 2), ('video_folder', 4, 'rgb', 3), ('video_folder', 1, 'flow', 2)])
def test_get_dataset_describes_converted_clips(tmp_path, name, num_classes, modality,
                                               channels):
  dataset_dir = _write_converted(tmp_path, name, num_classes, modality,
                                 {'train': 7, 'test': 3}, extra={'source_split': 1})
  with open(os.path.join(dataset_dir, 'dataset_info.json')) as handle:
    assert json.load(handle) == {
        'dataset_name': name, 'num_classes': num_classes, 'num_channels': channels,
        'splits': {'train': 7, 'test': 3}, 'modality': modality, 'format_version': 2,
        'source_split': 1}
  for split_name, size in (('train', 7), ('test', 3)):
    split = dataset_factory.get_dataset(name, split_name, dataset_dir)
    assert (split.name, split.split_name, split.dataset_dir) == (name, split_name, dataset_dir)
    assert (split.num_samples, split.num_classes) == (size, num_classes)
    assert (split.modality, split.num_channels) == (modality, channels)
    assert split.labels_to_names == {label: 'class_%03d' % label
                                     for label in range(num_classes)}
    assert split.file_pattern == os.path.join(dataset_dir, split_name + '-?????-of-00002')
    assert sorted(os.listdir(dataset_dir)) == [
        'dataset_info.json', 'labels.txt', 'test-00000-of-00002', 'test-00001-of-00002',
        'train-00000-of-00002', 'train-00001-of-00002']
    hash(split)


@pytest.mark.parametrize('name, found, expected', [('ucf101', 100, 101), ('hmdb51', 101, 51)])
def test_wrong_class_count_is_refused(tmp_path, name, found, expected):
  dataset_dir = _write_converted(tmp_path, name, found, 'rgb', {'train': 2, 'test': 1})
  with pytest.raises(DatasetError) as info:
    dataset_factory.get_dataset(name, 'train', dataset_dir)
  assert _one_line(info).startswith(
      '%s describes %s with %d classes; %s has %d; re-run: python -m datasets.convert_videos '
      '--dataset_name=%s ' % (os.path.join(dataset_dir, 'dataset_info.json'), name, found,
                              name, expected, name))


@pytest.mark.parametrize('name', _VIDEO_DATASETS)
def test_unknown_split_and_missing_dir(tmp_path, name):
  with pytest.raises(DatasetError) as info:
    dataset_factory.get_dataset(name, 'validation', str(tmp_path))
  assert _one_line(info).endswith("'validation' is not a%s %s split; valid splits: test, train"
                                  % ('n' if name == 'hmdb51' else '', name))
  missing = str(tmp_path / 'nowhere')
  with pytest.raises(DatasetError) as info:
    dataset_factory.get_dataset(name, 'train', missing)
  message = _one_line(info)
  assert message.startswith('dataset_dir %s does not exist; create it with: python -m '
                            'datasets.convert_videos --dataset_name=%s --video_dir='
                            % (missing, name))
  assert message.endswith('--output_dir=' + missing)


def test_info_written_beside_a_converters_own_shards(tmp_path):
  """convert_videos writes its shards itself (resumably), then only labels and info."""
  dataset_dir = str(tmp_path)
  for split_name, size in (('train', 5), ('test', 2)):
    shard_writer.write_shards([b'clip'] * size, dataset_dir, split_name, 2)
  converted_data.write_converted_info(dataset_dir, 'hmdb51', ['c%d' % i for i in range(51)], 2,
                                      {'train': 5, 'test': 2}, modality='flow')
  split = dataset_factory.get_dataset('hmdb51', 'test', dataset_dir)
  assert (split.num_samples, split.num_classes, split.modality, split.num_channels) == (
      2, 51, 'flow', 2)
  assert split.labels_to_names[50] == 'c50'


def test_image_data_is_not_taken_for_clips(tmp_path, digits_dir):
  with pytest.raises(DatasetError, match="holds converted 'digits' data, not 'ucf101'"):
    dataset_factory.get_dataset('ucf101', 'train', digits_dir)
  # Written as if by an image converter under a video name: no modality.
  shard_writer.write_converted_dataset(str(tmp_path), 'video_folder', ['a', 'b'], 3,
                                         {'train': ([b'x'], 1), 'test': ([b'y'], 1)}, 1)
  with pytest.raises(DatasetError) as info:
    dataset_factory.get_dataset('video_folder', 'test', str(tmp_path))
  assert 'has no modality (rgb or flow): it is not converted video data' in _one_line(info)


def test_image_datasets_have_no_modality(digits_dir):
  split = dataset_factory.get_dataset('digits', 'train', digits_dir)
  assert (split.modality, split.num_channels) == (None, 1)
  with open(os.path.join(digits_dir, 'dataset_info.json')) as handle:
    assert sorted(json.load(handle)) == ['dataset_name', 'num_channels', 'num_classes',
                                         'splits']


@pytest.mark.parametrize('modality, channels, extra, message', [
    ('rgb', 2, None, "modality='rgb' with num_channels=2 is not accepted; valid: rgb with 3, "
                     'flow with 2'),
    ('depth', 1, None, "modality='depth' with num_channels=1 is not accepted"),
    ('flow', 2, {'splits': {}, 'modality': 'rgb'}, 'extra may not set modality, splits'),
])
def test_write_refuses_inconsistent_metadata_before_writing(tmp_path, modality, channels,
                                                            extra, message):
  output_dir = str(tmp_path / 'out')
  with pytest.raises(ValueError, match='^' + message):
    shard_writer.write_converted_dataset(output_dir, 'ucf101', ['a'], channels,
                                           {'train': ([b'x'], 1)}, 1, modality=modality,
                                           extra=extra)
  assert not os.path.exists(output_dir)


def test_info_with_inconsistent_modality_is_refused(tmp_path):
  dataset_dir = _write_converted(tmp_path, 'video_folder', 2, 'flow', {'train': 1, 'test': 1})
  info_path = os.path.join(dataset_dir, 'dataset_info.json')
  with open(info_path) as handle:
    record = json.load(handle)
  record['num_channels'] = 3
  with open(info_path, 'w') as handle:
    json.dump(record, handle)
  with pytest.raises(DatasetError) as info:
    dataset_factory.get_dataset('video_folder', 'train', dataset_dir)
  assert _one_line(info).startswith("%s has modality 'flow' with num_channels 3; valid: rgb "
                                    'with 3, flow with 2; re-run: ' % info_path)


def test_registry_lists_the_video_datasets():
  assert set(_VIDEO_DATASETS) <= set(dataset_factory.list_datasets())


@pytest.mark.parametrize('name', _VIDEO_DATASETS)
def test_convert_images_refuses_video_datasets(tmp_path, name):
  output_dir = str(tmp_path / 'out')
  with pytest.raises(DatasetError) as info:
    convert_images.convert(name, output_dir)
  assert _one_line(info) == (
      '%s is a video dataset; convert it with: python -m datasets.convert_videos '
      '--dataset_name=%s ... --output_dir=%s (convert_images handles digits, image_folder)'
      % (name, name, output_dir))
  assert not os.path.exists(output_dir)


def test_convert_images_cli_refuses_a_video_dataset_in_one_line(tmp_path, capsys):
  # The command line in this process, as the tool's main runs it (tests/entries.py).
  output_dir = str(tmp_path / 'out')
  status, _ = entries.call(ImageConversion,
                              ['--dataset_name=ucf101', '--output_dir=' + output_dir],
                              convert_images.convert_images)
  assert status == 2
  assert capsys.readouterr().err.splitlines() == [
      'error: ucf101 is a video dataset; convert it with: python -m datasets.convert_videos '
      '--dataset_name=ucf101 ... --output_dir=%s (convert_images handles digits, '
      'image_folder)' % output_dir]
  assert not os.path.exists(output_dir)
