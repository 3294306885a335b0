"""The dataset registry: one entry per name, from the module that declares the dataset.

    split = dataset_factory.get_dataset('digits', 'train', '/data/digits')

Adding a dataset is one module (`NAME`, `get_split`, `convert_command`, and for videos
`read_split_lists`) and one `register_dataset(module)` line at the end of this file.
"""

import dataclasses
from typing import Callable, Optional

from datasets.conversion import convert_digits
from datasets.conversion import convert_image_folder
from datasets.conversion import source_groups
from datasets import digits
from datasets import hmdb51
from datasets import image_folder
from datasets import ucf101
from datasets import video_folder
# DatasetSplit is re-exported: slim users look for the split type beside get_dataset.
from datasets.dataset_split import IMAGE, VIDEO, DatasetError, DatasetSplit  # pylint: disable=unused-import


@dataclasses.dataclass(frozen=True)
class DatasetEntry:
  """Everything about one dataset name.

  Attributes:
    name: the registered name (`--dataset_name`).
    get_split: (split_name, dataset_dir) -> DatasetSplit.
    convert_command: (dataset_dir) -> the command line that converts this dataset into
      dataset_dir, for every "not converted yet" message.
    convert: image datasets: (output_dir, *, image_dir, num_shards, test_fraction, seed) ->
      ConversionResult, run by `python -m datasets.convert_images`; it rejects the
      arguments it has no use for. None for video datasets.
    read_split_lists: video datasets: (splits_dir, split, video_dir, test_fraction, seed,
      group_by) -> video_splits.SplitLists, read by `python -m datasets.convert_videos`
      (a reader of published lists ignores the rest). None for image datasets.
  """
  name: str
  get_split: Callable
  convert_command: Callable
  convert: Optional[Callable] = None
  read_split_lists: Optional[Callable] = None

  @property
  def kind(self):
    """VIDEO (clip records) or IMAGE."""
    return VIDEO if self.read_split_lists is not None else IMAGE


# Conversion defaults, shared with the convert_images CLI. The digits split is fixed and
# equals these (1437/360 is 0.2 of 1,797 rounded up, seed 0).
DEFAULT_NUM_SHARDS = 4
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_SEED = 0

_REGISTRY = {}


def register_dataset(module, convert=None):
  """Adds the dataset that `module` declares: `NAME`, `get_split`, `convert_command` and,
  for a video dataset, `read_split_lists`; an image dataset passes its `convert`.

  Raises:
    ValueError: a name registered twice, or a module that is neither kind.
  """
  name = module.NAME
  if name in _REGISTRY:
    raise ValueError('dataset %r is already registered' % name)
  read_split_lists = getattr(module, 'read_split_lists', None)
  if (convert is None) == (read_split_lists is None):
    raise ValueError('dataset %r needs exactly one of a convert function (images) or '
                     'read_split_lists (videos)' % name)
  _REGISTRY[name] = DatasetEntry(name=name, get_split=module.get_split,
                                 convert_command=module.convert_command, convert=convert,
                                 read_split_lists=read_split_lists)


def list_datasets(kind=None):
  """Returns the registered dataset names, sorted; only those of `kind` (IMAGE, VIDEO) if
  given."""
  return sorted(name for name, entry in _REGISTRY.items() if kind in (None, entry.kind))


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


def read_split_lists(name, splits_dir=None, split=1, video_dir=None, test_fraction=0.3,
                     seed=0, group_by=source_groups.DEFAULT_GROUP_BY):
  """The train/test lists of video dataset `name` (its module's `read_split_lists`).

  Raises:
    DatasetError (a ValueError): `name` is not a video dataset, or its reader's errors.
  """
  entry = _REGISTRY.get(name)
  if entry is None or entry.read_split_lists is None:
    raise DatasetError('dataset_name %r has no video split lists; valid names: %s'
                       % (name, ', '.join(list_datasets(VIDEO))))
  return entry.read_split_lists(splits_dir=splits_dir, split=split, video_dir=video_dir,
                                test_fraction=test_fraction, seed=seed, group_by=group_by)


register_dataset(digits, convert=_convert_digits)
register_dataset(image_folder, convert=_convert_image_folder)
register_dataset(ucf101)
register_dataset(hmdb51)
register_dataset(video_folder)
