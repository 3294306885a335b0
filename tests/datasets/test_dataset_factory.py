"""The dataset registry: names, splits, and the errors users see."""

import shutil

import pytest

from core.errors import ConfigError, DataError
from datasets import dataset_factory


def test_list_and_get(digits_dir):
  assert dataset_factory.list_datasets() == ['digits', 'hmdb51', 'image_folder', 'ucf101', 'video_folder']
  split = dataset_factory.get_dataset('digits', 'train', digits_dir)
  assert isinstance(split, dataset_factory.DatasetSplit)
  assert (split.name, split.num_samples) == ('digits', 1437)
  hash(split)  # frozen and hashable despite the labels dict


def test_unknown_name_lists_the_valid_ones(digits_dir):
  with pytest.raises(ValueError, match="'mnist' is not a known dataset; valid names: "
                                       'digits, hmdb51, image_folder, ucf101, video_folder'):
    dataset_factory.get_dataset('mnist', 'train', digits_dir)


@pytest.mark.parametrize('name', ['digits', 'image_folder'])
def test_unknown_split_lists_the_valid_ones(digits_dir, name):
  with pytest.raises(ValueError, match="'validation' is not an? .* split; valid splits: "
                                       'test, train'):
    dataset_factory.get_dataset(name, 'validation', digits_dir)


@pytest.mark.parametrize('name, flags', [
    ('digits', '--dataset_name=digits --output_dir='),
    ('image_folder', '--dataset_name=image_folder --image_dir=<class-folder tree> '
                     '--output_dir=')])
def test_missing_dir_names_the_command(tmp_path, name, flags):
  missing = str(tmp_path / 'nowhere')
  with pytest.raises(ValueError) as info:
    dataset_factory.get_dataset(name, 'train', missing)
  message = str(info.value)
  assert missing in message and '\n' not in message
  assert 'python -m datasets.convert_images ' + flags + missing in message


def test_dir_without_converted_data_names_the_command(tmp_path):
  with pytest.raises(ValueError, match='no converted digits data .* python -m '
                                       'datasets.convert_images --dataset_name=digits'):
    dataset_factory.get_dataset('digits', 'test', str(tmp_path))


def test_other_dataset_in_dir_is_reported(digits_dir):
  with pytest.raises(ValueError, match="holds converted 'digits' data, not 'image_folder'"):
    dataset_factory.get_dataset('image_folder', 'train', digits_dir)


def test_duplicate_registration_is_refused():
  from datasets import digits  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match='already registered'):
    dataset_factory.register_dataset(digits)


@pytest.mark.parametrize('name, text, expected', [
    ('dataset_info.json', '{"dataset_name": "digits", "num_cl', 'is not valid JSON'),
    ('dataset_info.json', '{"dataset_name": "digits"}', 'lacks num_classes, num_channels'),
    ('labels.txt', '0:zero\nthree\n', 'line 2 is \'three\', expected "index:name"')])
def test_a_damaged_info_or_labels_file_is_damaged_data_not_a_user_mistake(
    digits_dir, tmp_path, name, text, expected):
  """Status 3 (DataError), naming the file, not 2: the flags were right."""
  copy = tmp_path / 'digits'
  shutil.copytree(digits_dir, str(copy))
  (copy / name).write_text(text)
  with pytest.raises(DataError) as info:
    dataset_factory.get_dataset('digits', 'train', str(copy))
  assert not isinstance(info.value, ConfigError)
  assert str(copy / name) in str(info.value) and expected in str(info.value)
  assert str(info.value).endswith('re-run the conversion')
