"""Any class-folder tree of videos (`<video_dir>/<class>/<video>`), converted to clip records.

The split comes from lists of the UCF101 form (`--splits_dir` with classInd.txt,
trainlist0N.txt, testlist0N.txt) or, without lists, from a seeded stratified held-out
fraction of each class (see `video_splits`). Split sizes, the modality and the channel count
come from the converted data's dataset_info.json, class names from labels.txt. Create it
with:

    python -m datasets.convert_videos --dataset_name=video_folder --video_dir=TREE \\
        --output_dir=DIR [--splits_dir=LISTS --split=1 | --test_fraction=0.3 --seed=0]
"""

from datasets import converted_data
from datasets.dataset_split import DatasetError

NAME = 'video_folder'
SPLIT_NAMES = ('train', 'test')
MODALITIES = tuple(converted_data.MODALITY_CHANNELS)  # 'rgb' (3 channels), 'flow' (2)
ITEMS_TO_DESCRIPTIONS = {
    'clip': 'A video as a tf.train.SequenceExample of per-frame JPEGs (rgb or flow u/v).',
    'label': 'Class index: classInd.txt order, or the sorted class folder names.',
}


def convert_command(dataset_dir):
  """The command that converts this dataset into `dataset_dir` (for error messages)."""
  return converted_data.convert_command(NAME, dataset_dir,
                                         ['--video_dir=<class-folder tree>'],
                                         module='datasets.convert_videos')


def get_split(split_name, dataset_dir):
  """Describes one split of a converted class-folder tree of videos in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown split, missing or incomplete converted data, or
      data that is not video.
  """
  if split_name not in SPLIT_NAMES:
    raise DatasetError('split_name %r is not a video_folder split; valid splits: %s'
                       % (split_name, ', '.join(sorted(SPLIT_NAMES))))
  command = convert_command(dataset_dir)
  return converted_data.load_video_split(NAME, split_name, dataset_dir, command)
