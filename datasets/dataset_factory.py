"""The dataset registry: one entry per name, from the module that declares the dataset.

    split = dataset_factory.get_dataset('digits', 'train', '/data/digits')

Adding a dataset is one module (`NAME`, `get_split`, `convert_command`, and for videos
`read_split_lists`: a `video_dataset.VideoDatasetSpec` gives all four) and one
`register_dataset(module)` line at the end of this file. The registry declares; it
converts nothing (an image dataset's converter is in `conversion/convert_images.py`).
"""

import dataclasses
from typing import Callable, Optional

from datasets import digits, hmdb51, image_folder, ucf101, video_folder
from datasets.formats.dataset_split import IMAGE, VIDEO, DatasetError
# Re-exported (the redundant alias says so): slim users look for the split type beside
# get_dataset.
from datasets.formats.dataset_split import DatasetSplit as DatasetSplit
from datasets.splits import source_groups


@dataclasses.dataclass(frozen=True)
class DatasetEntry:
  """Everything about one dataset name.

  Attributes:
    name: the registered name (`--dataset_name`).
    get_split: (split_name, dataset_dir) -> DatasetSplit.
    convert_command: (dataset_dir) -> the command line that converts this dataset into
      dataset_dir, for every "not converted yet" message.
    read_split_lists: video datasets: (splits_dir, split, video_dir, test_fraction, seed,
      group_by) -> video_splits.SplitLists, read by `python -m datasets.convert_videos`
      (a reader of published lists ignores the rest). None for image datasets, which
      `python -m datasets.convert_images` converts.
  """
  name: str
  get_split: Callable
  convert_command: Callable
  read_split_lists: Optional[Callable] = None

  @property
  def kind(self):
    """VIDEO (clip records) or IMAGE."""
    return VIDEO if self.read_split_lists is not None else IMAGE


_REGISTRY = {}


def register_dataset(module):
  """Adds the dataset that `module` declares: `NAME`, `get_split`, `convert_command` and,
  for a video dataset, `read_split_lists`.

  Raises:
    ValueError: a name registered twice, or a module lacking one of the three.
  """
  missing = [name for name in ('NAME', 'get_split', 'convert_command')
             if not hasattr(module, name)]
  if missing:
    raise ValueError('module %s does not declare a dataset: it lacks %s'
                     % (module.__name__, ', '.join(missing)))
  name = module.NAME
  if name in _REGISTRY:
    raise ValueError('dataset %r is already registered' % name)
  _REGISTRY[name] = DatasetEntry(name=name, get_split=module.get_split,
                                 convert_command=module.convert_command,
                                 read_split_lists=getattr(module, 'read_split_lists', None))


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


register_dataset(digits)
register_dataset(image_folder)
register_dataset(ucf101)
register_dataset(hmdb51)
register_dataset(video_folder)
