"""scikit-learn's digits: 1,797 real 8x8 grey handwritten digits, 10 classes ('0'..'9').

The data is the test part of UCI's optdigits, shipped inside scikit-learn (no download).
Pixel values 0..16 are stored as 0..255 PNGs. The train/test split is fixed: a stratified
permutation seeded with SPLIT_SEED (see `stratified_split`), 1,437 train and 360 test.
Create the converted data with:

    python -m datasets.convert_images --dataset_name=digits --output_dir=DIR
"""

from datasets.formats import converted_data
from datasets.formats.dataset_split import DatasetError

NAME = 'digits'
SPLITS_TO_SIZES = {'train': 1437, 'test': 360}
NUM_CLASSES = 10
NUM_CHANNELS = 1
IMAGE_SIZE = 8  # Native height and width; preprocessing resizes to the network's size.
SPLIT_SEED = 0
CLASS_NAMES = tuple(str(digit) for digit in range(NUM_CLASSES))
ITEMS_TO_DESCRIPTIONS = {
    'image': 'An 8x8 grey image of a handwritten digit, uint8 [8, 8, 1].',
    'label': 'The digit, 0..9.',
}


def convert_command(dataset_dir):
  """The command that converts this dataset into `dataset_dir` (for error messages)."""
  return converted_data.convert_command(NAME, dataset_dir)


def get_split(split_name, dataset_dir):
  """Describes one split of converted digits data in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown split, missing or incomplete converted data, or
      converted data whose sizes are not the fixed split's.
  """
  converted_data.check_split_name(NAME, split_name, SPLITS_TO_SIZES)
  command = convert_command(dataset_dir)
  split = converted_data.load_split(NAME, split_name, dataset_dir, command)
  found = (split.num_samples, split.num_classes, split.num_channels)
  expected = (SPLITS_TO_SIZES[split_name], NUM_CLASSES, NUM_CHANNELS)
  if found != expected:
    raise DatasetError('%s describes digits %s as %d samples, %d classes, %d channels; '
                       'expected %d, %d, %d; re-run: %s'
                       % (dataset_dir, split_name, *found, *expected, command))
  return split
