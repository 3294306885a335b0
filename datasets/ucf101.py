"""UCF101: 13,320 action clips from YouTube, 101 classes, 25 fps, 320x240 (.avi).

The official lists (`ucfTrainTestlist`) define three train/test splits that hold out disjoint
groups g01..g25 of clips (split 1 tests g01..g07); see `video_splits`. Split sizes, the
modality and the channel count come from the converted data's dataset_info.json, class names
(classInd.txt order) from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=ucf101 --video_dir=UCF-101 \\
        --splits_dir=ucfTrainTestlist --output_dir=DIR [--split=1 --modality=rgb]
"""

from datasets import converted_data
from datasets.conversion import video_splits

NAME = 'ucf101'
SPLIT_NAMES = ('train', 'test')
NUM_CLASSES = 101
MODALITIES = tuple(converted_data.MODALITY_CHANNELS)  # 'rgb' (3 channels), 'flow' (2)
# Videos listed by the official splits; the converted sizes are smaller if videos are skipped.
OFFICIAL_SPLITS_TO_SIZES = {1: {'train': 9537, 'test': 3783},
                            2: {'train': 9586, 'test': 3734},
                            3: {'train': 9624, 'test': 3696}}
ITEMS_TO_DESCRIPTIONS = {
    'clip': 'A video as a tf.train.SequenceExample of per-frame JPEGs (rgb or flow u/v).',
    'label': 'Class index 0..100, classInd.txt order (its 1-based index minus one).',
}


def convert_command(dataset_dir):
  """The command that converts this dataset into `dataset_dir` (for error messages)."""
  return converted_data.convert_command(
      NAME, dataset_dir, ['--video_dir=<UCF-101 tree>', '--splits_dir=<ucfTrainTestlist>'],
      module='datasets.convert_videos')


def get_split(split_name, dataset_dir):
  """Describes one split of converted UCF101 clips in `dataset_dir`.

  Raises:
    DatasetError (a ValueError): unknown split, missing or incomplete converted data, data
      that is not video, or a class count other than 101.
  """
  converted_data.check_split_name(NAME, split_name, SPLIT_NAMES)
  return converted_data.load_video_split(NAME, split_name, dataset_dir,
                                         convert_command(dataset_dir), NUM_CLASSES)


def read_split_lists(splits_dir=None, split=1, **_):
  """The official lists of split `split` (1..3) in `splits_dir` (ucfTrainTestlist) ->
  video_splits.SplitLists. Raises DatasetError for a bad split or a missing list."""
  video_splits.check_split(NAME, split, video_splits.OFFICIAL_SPLITS)
  splits_dir = video_splits.existing_dir(
      'splits_dir', splits_dir, NAME,
      'the ucfTrainTestlist directory (classInd.txt, trainlist01.txt, testlist01.txt, ...)')
  return video_splits.read_ucf_style_lists(splits_dir, split)
