"""HMDB51: 6,766 action clips from films and the web, 51 classes (.avi).

The official lists (`testTrainMulti_7030_splits`) define three splits, each with 70 train
and 30 test videos per class; labels follow the sorted class names (see `video_splits`).
Split sizes, the modality and the channel count come from the converted data's
dataset_info.json, class names from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=hmdb51 --video_dir=hmdb51 \\
        --splits_dir=testTrainMulti_7030_splits --output_dir=DIR [--split=1 --modality=rgb]
"""

from datasets import converted_data
from datasets.dataset_split import DatasetError

NAME = 'hmdb51'
SPLIT_NAMES = ('train', 'test')
NUM_CLASSES = 51
MODALITIES = tuple(converted_data.MODALITY_CHANNELS)  # 'rgb' (3 channels), 'flow' (2)
ITEMS_TO_DESCRIPTIONS = {
    'clip': 'A video as a tf.train.SequenceExample of per-frame JPEGs (rgb or flow u/v).',
    'label': 'Class index 0..50 among the sorted class names.',
}


def convert_command(dataset_dir):
  """The command that converts this dataset into `dataset_dir` (for error messages)."""
  return converted_data.convert_command(
      NAME, dataset_dir,
      ['--video_dir=<hmdb51 tree>', '--splits_dir=<testTrainMulti_7030_splits>'],
      module='datasets.convert_videos')


def get_split(split_name, dataset_dir):
  """Describes one split of converted HMDB51 clips in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown split, missing or incomplete converted data, data
      that is not video, or a class count other than 51.
  """
  if split_name not in SPLIT_NAMES:
    raise DatasetError('split_name %r is not an hmdb51 split; valid splits: %s'
                       % (split_name, ', '.join(sorted(SPLIT_NAMES))))
  command = convert_command(dataset_dir)
  return converted_data.load_video_split(NAME, split_name, dataset_dir, command, NUM_CLASSES)
