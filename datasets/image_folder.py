"""Any class-folder tree of images (`<image_dir>/<class>/<image>`), converted to RGB records.

Split sizes, class and channel counts come from the converted data's dataset_info.json,
class names (the sub-directory names, sorted) from labels.txt. Create it with:

    python -m datasets.convert_images --dataset_name=image_folder --image_dir=TREE \\
        --output_dir=DIR [--test_fraction=0.2 --seed=0]
"""

from datasets.formats import converted_data

NAME = 'image_folder'
SPLIT_NAMES = ('train', 'test')
NUM_CHANNELS = 3  # The converter turns every image into RGB.
ITEMS_TO_DESCRIPTIONS = {
    'image': 'An RGB image of any size, uint8 [H, W, 3].',
    'label': 'Index of its class folder among the sorted folder names.',
}


def convert_command(dataset_dir):
  """The command that converts this dataset into `dataset_dir` (for error messages)."""
  return converted_data.convert_command(NAME, dataset_dir,
                                         ['--image_dir=<class-folder tree>'])


def get_split(split_name, dataset_dir):
  """Describes one split of a converted class-folder tree in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown split, or missing or incomplete converted data.
  """
  converted_data.check_split_name(NAME, split_name, SPLIT_NAMES)
  return converted_data.load_split(NAME, split_name, dataset_dir, convert_command(dataset_dir))
