"""Names to things: network specs, dataset splits, and the modality they share.

Every function raises `ConfigError` with one line naming the flag, the value and what
would be accepted.
"""

import os

from core.errors import require
from core.params import ConfigError
from datasets import dataset_factory
from nets import nets_factory

__all__ = ['IMAGE', 'VIDEO', 'network_spec', 'dataset_entry', 'convert_command',
           'dataset_split', 'check_network_takes']

IMAGE, VIDEO = dataset_factory.IMAGE, dataset_factory.VIDEO



def _known(kind, flag, name, valid_names):
  """`name`, checked present and among `valid_names` (one wording for every registry)."""
  valid = ', '.join(valid_names)
  require(name, '--%s is required; valid: %s' % (flag, valid))
  require(name in valid_names, '--%s=%s is not a known %s; valid: %s'
           % (flag, name, kind, valid))
  return name


def network_spec(model_name, flag='model_name'):
  """The registered network `model_name`."""
  return nets_factory.get_network_spec(
      _known('network', flag, model_name, nets_factory.list_networks()))


def dataset_entry(dataset_name, flag='dataset_name'):
  """The registry entry of `dataset_name`."""
  return dataset_factory.get_entry(
      _known('dataset', flag, dataset_name, dataset_factory.list_datasets()))


def convert_command(dataset_name, dataset_dir):
  """The command that converts `dataset_name` into `dataset_dir` (images or videos)."""
  return dataset_entry(dataset_name).convert_command(dataset_dir or 'DIR')


def dataset_split(dataset_name, split_name, dataset_dir, flag='dataset_dir',
                  need_examples=False):
  """get_dataset, its errors turned into one line naming the flag at fault; a missing
  directory names the convert command that fits the dataset."""
  command = convert_command(dataset_name, dataset_dir)
  require(dataset_dir, '--%s is required: a directory written by %s' % (flag, command))
  require(os.path.isdir(dataset_dir), '--%s=%s does not exist; create it with %s'
           % (flag, dataset_dir, command))
  try:
    split = dataset_factory.get_dataset(dataset_name, split_name, dataset_dir)
  except ValueError as error:
    bad = ('dataset_split_name=%s' % split_name if 'split' in str(error).split(';')[0]
           else '%s=%s' % (flag, dataset_dir))
    raise ConfigError('--%s: %s' % (bad, error)) from None
  require(not need_examples or split.num_samples > 0, '--%s=%s: the %s split holds no %s; '
           'use a split with data' % (flag, dataset_dir, split_name,
                                      'videos' if split.kind == VIDEO else 'examples'))
  return split


def check_network_takes(spec, model_name, dataset_name, split):
  """The network takes what the split holds: clips for a video network, images for an
  image network. Returns the modality."""
  kind = split.kind
  video_nets = [n for n in nets_factory.list_networks()
                if nets_factory.get_network_spec(n).default_num_frames is not None]
  image_nets = [n for n in nets_factory.list_networks() if n not in video_nets]
  if kind == VIDEO:
    require(spec.default_num_frames is not None, '--model_name=%s is an image network, but '
             '--dataset_name=%s holds %s videos; use a video network: %s'
             % (model_name, dataset_name, split.modality, ', '.join(video_nets)))
  else:
    require(spec.default_num_frames is None, '--model_name=%s takes video clips, but '
             '--dataset_name=%s holds images; use an image network (%s) or a video dataset '
             '(%s)' % (model_name, dataset_name, ', '.join(image_nets),
                       ', '.join(dataset_factory.list_datasets(dataset_factory.VIDEO))))
  return kind
