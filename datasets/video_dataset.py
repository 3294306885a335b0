"""One spec for every video dataset: ucf101, hmdb51 and video_folder differ only in data.

A `VideoDatasetSpec` holds what differs (name, class count, the convert command's source
flags, the parser of the published split lists, the list numbers it accepts, and for
video_folder the split it makes of a tree without lists); its methods are the one
`get_split`, `convert_command` and `read_split_lists` every video dataset shares. A
dataset module is its spec and one line that exports those for slim's callers and for
`dataset_factory.register_dataset(module)`:

    SPEC = VideoDatasetSpec(name='ucf101', num_classes=101, ...)
    NAME, get_split, convert_command, read_split_lists = SPEC.declaration()
"""

import dataclasses
from typing import Callable, Optional, Tuple

from datasets.formats import converted_data
from datasets.splits import source_groups, video_splits

__all__ = ['VideoDatasetSpec', 'CONVERT_MODULE', 'SPLIT_NAMES', 'MODALITIES']

CONVERT_MODULE = 'datasets.convert_videos'
SPLIT_NAMES = ('train', 'test')
MODALITIES = tuple(converted_data.MODALITY_CHANNELS)  # 'rgb' (3 channels), 'flow' (2)


@dataclasses.dataclass(frozen=True)
class VideoDatasetSpec:
  """Everything that differs between two video datasets.

  Attributes:
    name: the registered name (`--dataset_name`).
    source_flags: the convert command's flags naming the sources, e.g.
      ('--video_dir=<UCF-101 tree>', '--splits_dir=<ucfTrainTestlist>').
    read_lists: (splits_dir, split) -> video_splits.SplitLists: the parser of the
      published lists (`datasets/splits/video_splits.py`).
    lists_dir: what `--splits_dir` holds, for the line saying it is missing.
    list_splits: the split numbers the lists have (`--split`).
    num_classes: the classes converted data must have; None: any number.
    label_description: how a label is numbered (slim's ITEMS_TO_DESCRIPTIONS).
    split_without_lists: (name, video_dir, test_fraction, seed, group_by) -> SplitLists
      when no `--splits_dir` is given (video_folder: `source_groups.split_tree`); None:
      the lists are required.
  """
  name: str
  source_flags: Tuple[str, ...]
  read_lists: Callable
  lists_dir: str
  list_splits: Tuple[int, ...] = video_splits.OFFICIAL_SPLITS
  num_classes: Optional[int] = None
  label_description: str = 'Class index 0..num_classes-1.'
  split_without_lists: Optional[Callable] = None

  @property
  def items_to_descriptions(self):
    """slim's description of what a record holds."""
    return {'clip': 'A video as chunked tf.train.SequenceExamples of per-frame JPEGs (rgb '
                    'or flow u/v).', 'label': self.label_description}

  def convert_command(self, dataset_dir):
    """The command that converts this dataset into `dataset_dir` (for error messages)."""
    return converted_data.convert_command(self.name, dataset_dir, list(self.source_flags),
                                          module=CONVERT_MODULE)

  def get_split(self, split_name, dataset_dir):
    """slim's `get_split`: describes one split of this dataset's clips in `dataset_dir`.

    Raises:
      DatasetError (a ValueError): unknown split, missing or incomplete converted data,
        data that is not video, or a class count other than `num_classes`.
    """
    converted_data.check_split_name(self.name, split_name, SPLIT_NAMES)
    return converted_data.load_video_split(self.name, split_name, dataset_dir,
                                           self.convert_command(dataset_dir),
                                           self.num_classes)

  def read_split_lists(self, splits_dir=None, split=1, video_dir=None, test_fraction=0.3,
                       seed=0, group_by=source_groups.DEFAULT_GROUP_BY):
    """The train/test lists: split `split` of the lists in `splits_dir`, or without
    `splits_dir` the dataset's own split of `video_dir` (if it has one).
    -> video_splits.SplitLists; raises DatasetError."""
    if not splits_dir and self.split_without_lists is not None:
      return self.split_without_lists(self.name, video_dir, test_fraction, seed, group_by)
    video_splits.check_split(self.name, split, self.list_splits)
    video_splits.existing_dir('splits_dir', splits_dir, self.name, self.lists_dir)
    return self.read_lists(splits_dir, split)

  def declaration(self):
    """(NAME, get_split, convert_command, read_split_lists): a dataset module's names."""
    return self.name, self.get_split, self.convert_command, self.read_split_lists
