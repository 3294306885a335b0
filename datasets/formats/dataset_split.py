"""What a dataset split is: the description every dataset module's `get_split` returns."""

import dataclasses
from typing import Dict, Optional

from core.errors import ConfigError

# The two kinds of data (input modalities): what decides the input pipeline and the networks
# that fit. Decided by the records (a video split has an rgb or flow `modality`), only here.
IMAGE, VIDEO = 'image', 'video'


class DatasetError(ConfigError):
  """A user-facing problem with a dataset name, split, directory or conversion input.

  The message is one line naming the bad value and what would be accepted, so command line
  tools print it as `error: <message>` without a traceback: a ConfigError (a ValueError),
  exit status 2 (USAGE) in core/errors.py's table.
  """


@dataclasses.dataclass(frozen=True)
class DatasetSplit:
  """One split of one converted dataset (slim's `Dataset`, without the decoder objects).

  Attributes:
    name: registered dataset name, e.g. 'digits'.
    split_name: e.g. 'train' or 'test'.
    dataset_dir: directory holding the converted shards, labels.txt and dataset_info.json.
    file_pattern: glob matching exactly this split's TFRecord shards.
    num_samples: number of records in the split.
    num_classes: number of classes (labels are 0..num_classes-1).
    labels_to_names: {label: class name} from labels.txt.
    num_channels: channels every decoded image or frame has (1 grey, 3 RGB, 2 flow u/v).
    modality: None for image datasets; 'rgb' or 'flow' for the clips of a video dataset.
  """
  name: str
  split_name: str
  dataset_dir: str
  file_pattern: str
  num_samples: int
  num_classes: int
  # A dict is not hashable; leaving it out of the hash keeps the dataclass hashable.
  labels_to_names: Dict[int, str] = dataclasses.field(hash=False)
  num_channels: int
  # Last and defaulted, so image datasets' constructors need not name it.
  modality: Optional[str] = None

  @property
  def kind(self):
    """IMAGE or VIDEO: what the records hold."""
    return VIDEO if self.modality else IMAGE
