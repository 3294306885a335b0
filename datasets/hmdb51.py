"""HMDB51: 6,766 action clips from films and the web, 51 classes (.avi).

The official lists (`testTrainMulti_7030_splits`) define three splits, each with 70 train
and 30 test videos per class; labels follow the sorted class names (see `video_splits`).
Split sizes, the modality and the channel count come from the converted data's
dataset_info.json, class names from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=hmdb51 --video_dir=hmdb51 \\
        --splits_dir=testTrainMulti_7030_splits --output_dir=DIR [--split=1 --modality=rgb]
"""

import os
import re

from datasets import converted_data
from datasets.conversion import video_splits
from datasets.conversion.video_splits import SplitLists, VideoEntry
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
  converted_data.check_split_name(NAME, split_name, SPLIT_NAMES)
  return converted_data.load_video_split(NAME, split_name, dataset_dir,
                                         convert_command(dataset_dir), NUM_CLASSES)


_FILE_RE = re.compile(r'^(?P<class_name>.+)_test_split(?P<split>\d+)\.txt$')
_CODES = {'1': 'train', '2': 'test'}  # '0': not used in this split


def _class_names(splits_dir, split):
  """Sorted class names of the `<class>_test_split<N>.txt` files; every one needs split N."""
  splits_of = {}
  for name in os.listdir(splits_dir):
    match = _FILE_RE.match(name)
    if match and not name.startswith('.'):
      splits_of.setdefault(match.group('class_name'), set()).add(int(match.group('split')))
  if not splits_of:
    raise DatasetError('--splits_dir=%s holds no HMDB51 split files '
                       '(<class>_test_split<N>.txt)' % splits_dir)
  lacking = sorted(name for name, numbers in splits_of.items() if split not in numbers)
  if lacking:
    raise DatasetError('%s is missing (%d of %d classes have no split %d file)'
                       % (os.path.join(splits_dir, '%s_test_split%d.txt' % (lacking[0], split)),
                          len(lacking), len(splits_of), split))
  return tuple(sorted(splits_of))


def read_split_lists(splits_dir=None, split=1, **_):
  """The official lists of split `split` (1..3): one `<class>_test_split<N>.txt` per class
  in `splits_dir`, lines "<video>.avi <code>" (1 train, 2 test, 0 unused); labels follow the
  sorted class names. -> video_splits.SplitLists; raises DatasetError."""
  video_splits.check_split(NAME, split, video_splits.OFFICIAL_SPLITS)
  splits_dir = video_splits.existing_dir(
      'splits_dir', splits_dir, NAME,
      'the testTrainMulti_7030_splits directory (<class>_test_split<N>.txt)')
  class_names = _class_names(splits_dir, split)
  splits = {'train': [], 'test': []}
  problems, taken = [], {}
  for label, class_name in enumerate(class_names):
    list_name = '%s_test_split%d.txt' % (class_name, split)
    for number, text in video_splits.read_lines(os.path.join(splits_dir, list_name)):
      parts = text.rsplit(None, 1)  # Keeps a video name with a space in one piece.
      where = '%s line %d' % (list_name, number)
      if len(parts) != 2 or parts[1] not in ('0', '1', '2'):
        problems.append(('%s/%s' % (class_name, text.split()[0]),
                         '%s: expected "<video> <code>" with code 0, 1 or 2' % where))
        continue
      path = '%s/%s' % (class_name, parts[0])
      if path in taken:
        problems.append((path, '%s: already listed at %s' % (where, taken[path])))
        continue
      taken[path] = where
      if parts[1] in _CODES:
        splits[_CODES[parts[1]]].append(VideoEntry(path, class_name, label))
  return SplitLists(class_names, {name: tuple(entries) for name, entries in splits.items()},
                    tuple(problems))
