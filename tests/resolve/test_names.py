"""resolve.names: one lookup, one wording, for train, eval and export alike."""

import pytest

from core.params import ConfigError
from datasets.formats import dataset_split
from nets import nets_factory
from resolve import names
from training.config import TrainConfig
from training.setup import check_train_config


@pytest.mark.parametrize('dataset_name, module, flag', [
    ('digits', 'datasets.convert_images', None),
    ('image_folder', 'datasets.convert_images', '--image_dir='),
    ('ucf101', 'datasets.convert_videos', '--splits_dir='),
    ('hmdb51', 'datasets.convert_videos', '--splits_dir='),
    ('video_folder', 'datasets.convert_videos', '--video_dir='),
])
def test_the_convert_command_fits_the_dataset(dataset_name, module, flag):
  command = names.convert_command(dataset_name, '/data/out')
  assert command.startswith('python -m %s --dataset_name=%s' % (module, dataset_name))
  assert command.endswith('--output_dir=/data/out')
  assert flag is None or flag in command


@pytest.mark.parametrize('dataset_name, module', [
    ('ucf101', 'datasets.convert_videos'), ('digits', 'datasets.convert_images')])
def test_a_missing_dataset_dir_names_its_own_converter(tmp_path, dataset_name, module):
  """Training told ucf101 and hmdb51 users to run convert_images."""
  missing = str(tmp_path / 'absent')
  for check in (lambda: names.dataset_split(dataset_name, 'train', missing),
                lambda: check_train_config(TrainConfig(
                    train_dir=str(tmp_path / 'train'), dataset_name=dataset_name,
                    dataset_dir=missing, model_name='i3d'))):
    with pytest.raises(ConfigError, match='does not exist; create it with python -m %s '
                       '--dataset_name=%s' % (module, dataset_name)):
      check()


def test_unknown_and_missing_names_list_the_valid_ones():
  with pytest.raises(ConfigError, match='--model_name=nope is not a known network; '
                                        'valid: .*lenet'):
    names.network_spec('nope')
  with pytest.raises(ConfigError, match='--model_name is required; valid: .*i3d'):
    names.network_spec(None)
  with pytest.raises(ConfigError, match='--dataset_name=nope is not a known dataset; '
                                        'valid: .*ucf101'):
    names.dataset_entry('nope')


def _Split(modality):  # pylint: disable=invalid-name
  return dataset_split.DatasetSplit(
      name='x', split_name='train', dataset_dir='', file_pattern='', num_samples=1,
      num_classes=2, labels_to_names={}, num_channels=3, modality=modality)


def test_the_network_must_take_what_the_split_holds():
  i3d, lenet = nets_factory.get_network_spec('i3d'), nets_factory.get_network_spec('lenet')
  assert names.check_network_takes(i3d, 'i3d', 'ucf101', _Split('rgb')) == names.VIDEO
  assert names.check_network_takes(lenet, 'lenet', 'digits', _Split(None)) == names.IMAGE
  with pytest.raises(ConfigError, match='--model_name=lenet is an image network, but '
                                        '--dataset_name=ucf101 holds flow videos'):
    names.check_network_takes(lenet, 'lenet', 'ucf101', _Split('flow'))
  with pytest.raises(ConfigError, match='--model_name=i3d takes video clips, but '
                                        '--dataset_name=digits holds images'):
    names.check_network_takes(i3d, 'i3d', 'digits', _Split(None))
