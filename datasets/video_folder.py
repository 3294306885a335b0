"""Any class-folder tree of videos (`<video_dir>/<class>/<video>`), converted to clip records.

The split comes from lists of the UCF101 form (`--splits_dir` with classInd.txt,
trainlist0N.txt, testlist0N.txt) or, without lists, from a seeded stratified held-out
fraction of each class's sources (`--group_by`, see `source_groups`: clips of one source
never land in both splits). Split sizes, the modality and the channel count come from
the converted data's dataset_info.json, class names from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=video_folder --video_dir=TREE \\
        --output_dir=DIR [--splits_dir=LISTS --split=1 |
                          --test_fraction=0.3 --seed=0 --group_by='_g(\\d+)_']
"""

import os

from datasets import converted_data
from datasets.conversion import source_groups, video_splits
from datasets.conversion.video_splits import SplitLists
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
  converted_data.check_split_name(NAME, split_name, SPLIT_NAMES)
  return converted_data.load_video_split(NAME, split_name, dataset_dir,
                                         convert_command(dataset_dir))


_MAX_LIST_SPLIT = 99  # lists are numbered trainlist01 .. trainlist99


def read_split_lists(splits_dir=None, split=1, video_dir=None, test_fraction=0.3, seed=0,
                     group_by=source_groups.DEFAULT_GROUP_BY):
  """With `splits_dir`: lists of the UCF101 form (trainlist0N.txt for split N). Without:
  the `<video_dir>/<class>/<video>` tree, its videos grouped by source (`group_by`, a
  regular expression on the file name; '' for single videos) and round(G * test_fraction)
  of the G groups held out for test (at most G - 1), spread over classes by
  `stratified_split` (image_folder's rule), seeded, every class keeping a training group;
  entries come in that seeded order, a group's videos together.
  -> video_splits.SplitLists (with `groups`); raises DatasetError."""
  if splits_dir:
    video_splits.check_split(NAME, split, tuple(range(1, _MAX_LIST_SPLIT + 1)))
    if not os.path.isdir(splits_dir):
      raise DatasetError('--splits_dir=%s does not exist or is not a directory' % splits_dir)
    return video_splits.read_ucf_style_lists(splits_dir, split)
  if (isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float))
      or not 0 <= test_fraction < 1):
    raise DatasetError('--test_fraction=%r is not accepted: use a number >= 0 and < 1'
                       % (test_fraction,))
  video_dir = video_splits.existing_dir(
      'video_dir', video_dir, NAME, 'a directory with one sub-directory of videos per class')
  class_names, entries, problems = video_splits.scan_tree(video_dir)
  if not entries:
    raise DatasetError('--video_dir=%s holds no video files (%s) in its class folders'
                       % (video_dir, ' '.join(video_splits.VIDEO_EXTENSIONS)))
  train, test, groups = source_groups.grouped_split(entries, test_fraction, seed, group_by)
  return SplitLists(class_names, {'train': train, 'test': test}, tuple(problems), groups)
