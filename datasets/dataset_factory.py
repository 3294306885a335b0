"""The dataset registry: one entry per name, holding its `get_split` and its converter.

    split = dataset_factory.get_dataset('digits', 'train', '/data/digits')
"""

import dataclasses
from typing import Callable

from datasets import convert_digits
from datasets import convert_image_folder
from datasets import digits
from datasets import hmdb51
from datasets import image_folder
from datasets import ucf101
from datasets import video_folder
# DatasetSplit is re-exported: slim users look for the split type beside get_dataset.
from datasets.dataset_split import DatasetError, DatasetSplit  # pylint: disable=unused-import


@dataclasses.dataclass(frozen=True)
class DatasetEntry:
  """Everything about one dataset name.

  Attributes:
    name: the registered name (`--dataset_name`).
    get_split: (split_name, dataset_dir) -> DatasetSplit.
    convert: (output_dir, *, image_dir, num_shards, test_fraction, seed) -> ConversionResult;
      rejects the arguments it has no use for. Video datasets refuse it: they are converted
      by `python -m datasets.convert_videos`.
    convert_command: (dataset_dir) -> the command line that converts this dataset into
      dataset_dir, for every "not converted yet" message.
  """
  name: str
  get_split: Callable
  convert: Callable
  convert_command: Callable


# Conversion defaults, shared with the convert_images CLI. The digits split is fixed and
# equals these (1437/360 is 0.2 of 1,797 rounded up, seed 0).
DEFAULT_NUM_SHARDS = 4
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_SEED = 0

_REGISTRY = {}


def register_dataset(name, get_split, convert, convert_command):
  """Adds a dataset name; a name registered twice raises ValueError."""
  if name in _REGISTRY:
    raise ValueError('dataset %r is already registered' % name)
  _REGISTRY[name] = DatasetEntry(name=name, get_split=get_split, convert=convert,
                                 convert_command=convert_command)


def list_datasets():
  """Returns the registered dataset names, sorted."""
  return sorted(_REGISTRY)


def get_entry(name):
  """Returns the DatasetEntry of `name`; unknown names raise DatasetError (a ValueError)."""
  if name not in _REGISTRY:
    raise DatasetError('dataset_name %r is not a known dataset; valid names: %s'
                       % (name, ', '.join(list_datasets())))
  return _REGISTRY[name]


def get_dataset(name, split_name, dataset_dir):
  """slim's `get_dataset`: describes split `split_name` of dataset `name` in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown name or split, or `dataset_dir` without complete
      converted data (the message names the command that creates it).
  """
  return get_entry(name).get_split(split_name, dataset_dir)


def _convert_digits(output_dir, *, image_dir, num_shards, test_fraction, seed):
  if image_dir is not None:
    raise DatasetError('--image_dir is only used by --dataset_name=image_folder; digits '
                       'comes with scikit-learn')
  # The digits split is fixed (digits.SPLIT_SEED, digits.SPLITS_TO_SIZES): a different seed
  # or fraction would silently produce data that get_split then rejects.
  if test_fraction != DEFAULT_TEST_FRACTION or seed != DEFAULT_SEED:
    raise DatasetError('digits has a fixed 1437/360 split; --test_fraction and --seed apply '
                       'to --dataset_name=image_folder only')
  return convert_digits.convert_digits(output_dir, num_shards)


def _convert_image_folder(output_dir, *, image_dir, num_shards, test_fraction, seed):
  return convert_image_folder.convert_image_folder(image_dir, output_dir, num_shards,
                                                   test_fraction, seed)


_IMAGE_DATASETS = (digits.NAME, image_folder.NAME)


def _video_converter(name):
  """A `convert` for video dataset `name` that points to the video converter."""
  def convert(output_dir, **_):
    raise DatasetError('%s is a video dataset; convert it with: python -m '
                       'datasets.convert_videos --dataset_name=%s ... --output_dir=%s '
                       '(convert_images handles %s)'
                       % (name, name, output_dir, ', '.join(_IMAGE_DATASETS)))
  return convert


register_dataset(digits.NAME, digits.get_split, _convert_digits, digits.convert_command)
register_dataset(image_folder.NAME, image_folder.get_split, _convert_image_folder,
                 image_folder.convert_command)
register_dataset(ucf101.NAME, ucf101.get_split, _video_converter(ucf101.NAME),
                 ucf101.convert_command)
register_dataset(hmdb51.NAME, hmdb51.get_split, _video_converter(hmdb51.NAME),
                 hmdb51.convert_command)
register_dataset(video_folder.NAME, video_folder.get_split,
                 _video_converter(video_folder.NAME), video_folder.convert_command)
