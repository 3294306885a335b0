"""The published split lists of video datasets: entries, the two list forms, checks.

Pure Python (no TensorFlow): the video converter reads the lists before it decodes anything.
Each video dataset's spec (`datasets/video_dataset.py`) names its parser here, and
`dataset_factory.read_split_lists(name, ...)` finds it by name:

    lists = dataset_factory.read_split_lists('ucf101', splits_dir='ucfTrainTestlist', split=1)
    lists.splits['train'][0]  # VideoEntry('ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi',
                              #            'ApplyEyeMakeup', 0)

Two forms: UCF101's (`read_ucf_style_lists`: classInd.txt "1 ApplyEyeMakeup", 1-based;
trainlist0N.txt "<class>/<video>.avi <label>"; testlist0N.txt "<class>/<video>.avi") and
HMDB51's (`read_hmdb_style_lists`); and a scan of a `<class>/<video>` tree. Lines that
cannot be used (unknown class, a contradicting label, a malformed or repeated line) are
returned in `SplitLists.problems`, not raised: the converter reports them as skipped
videos. A missing or unreadable list file, or a bad argument, raises DatasetError.
"""

import dataclasses
import os
import re
from typing import Any, Dict, Tuple

from datasets.formats.dataset_split import DatasetError

OFFICIAL_SPLITS = (1, 2, 3)     # ucf101 and hmdb51 both publish three splits
VIDEO_EXTENSIONS = ('.avi', '.mp4', '.mkv', '.mov', '.webm', '.mpg', '.mpeg', '.m4v', '.wmv',
                    '.flv')
SPLIT_NAMES = ('train', 'test')

CLASS_INDEX_FILENAME = 'classInd.txt'


@dataclasses.dataclass(frozen=True)
class VideoEntry:
  """One listed video.

  Attributes:
    relative_path: path below the video root, '/'-separated, e.g.
      'ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi'.
    class_name: its class, e.g. 'ApplyEyeMakeup'.
    label: 0-based index of the class in SplitLists.class_names.
  """
  relative_path: str
  class_name: str
  label: int


@dataclasses.dataclass(frozen=True)
class SplitLists:
  """The classes and the train/test videos of one split of one dataset.

  Attributes:
    class_names: tuple of names; index = label.
    splits: {'train': (VideoEntry, ...), 'test': (VideoEntry, ...)}; disjoint.
    problems: ((relative_path or line text, reason), ...) for entries that were left out.
    groups: how a split the converter made itself went (a source_groups.GroupCounts);
      None for published lists.
  """
  class_names: Tuple[str, ...]
  splits: Dict[str, Tuple[VideoEntry, ...]] = dataclasses.field(hash=False)
  problems: Tuple[Tuple[str, str], ...] = ()
  groups: Any = None


def check_split(dataset_name, split, accepted):
  if isinstance(split, bool) or not isinstance(split, int) or split not in accepted:
    valid = (', '.join(str(number) for number in accepted) if len(accepted) <= 3 else
             'an integer from %d to %d' % (accepted[0], accepted[-1]))
    raise DatasetError('--split=%r is not accepted for %s; valid splits: %s'
                       % (split, dataset_name, valid))


def existing_dir(flag, directory, dataset_name, expected):
  if not directory:
    raise DatasetError('--%s is required for --dataset_name=%s: %s'
                       % (flag, dataset_name, expected))
  if not os.path.isdir(directory):
    raise DatasetError('--%s=%s does not exist or is not a directory' % (flag, directory))
  return directory


def read_lines(path):
  """Returns [(line number, stripped text)] of the non-blank lines; CRLF, LF or a BOM."""
  if not os.path.isfile(path):
    raise DatasetError('%s is missing' % path)
  try:
    # Universal newlines turn CRLF (the published UCF101 lists) into '\n'.
    with open(path, encoding='utf-8-sig') as handle:
      lines = handle.read().splitlines()
  except (OSError, UnicodeDecodeError) as error:
    raise DatasetError('%s cannot be read as UTF-8 text (%s)' % (path, error)) from None
  return [(number, line.strip()) for number, line in enumerate(lines, start=1) if line.strip()]


def _read_class_index(path):
  """classInd.txt -> tuple of class names in label order ("1 Name" -> label 0)."""
  names = []
  for number, text in read_lines(path):
    parts = text.split(None, 1)
    expected = len(names) + 1
    if len(parts) != 2 or not parts[0].isdigit() or int(parts[0]) != expected:
      raise DatasetError('%s line %d is %r; expected "%d <ClassName>" (indices 1, 2, ... in '
                         'order)' % (path, number, text, expected))
    if parts[1] in names:
      raise DatasetError('%s line %d names class %r a second time' % (path, number, parts[1]))
    names.append(parts[1])
  if not names:
    raise DatasetError('%s lists no classes; expected lines "1 <ClassName>"' % path)
  return tuple(names)


def _parse_list_line(text):
  """'<class>/<video> [label]' -> (relative_path, stated 1-based label or None), or None."""
  parts = text.split()
  if len(parts) == 2 and parts[1].isdigit():
    return parts[0].replace('\\', '/'), int(parts[1])
  if len(parts) == 1:
    return parts[0].replace('\\', '/'), None
  return None


def _list_entry(text, labelled, label_of, class_names):
  """One list line -> (VideoEntry, None) or (None, reason it cannot be used)."""
  parsed = _parse_list_line(text)
  if parsed is None or (labelled and parsed[1] is None):
    return None, 'expected "<class>/<video>%s"' % (' <label>' if labelled else '')
  path, stated = parsed
  folder, _, file_name = path.partition('/')
  if not folder or not file_name or '/' in file_name:
    return None, 'expected a path "<class>/<video>"'
  if folder not in label_of:
    return None, 'class %r is not in %s' % (folder, CLASS_INDEX_FILENAME)
  label = label_of[folder]
  if stated is not None and stated != label + 1:
    stated_name = (class_names[stated - 1] if 1 <= stated <= len(class_names)
                   else 'not in %s' % CLASS_INDEX_FILENAME)
    return None, 'label %d (%s) disagrees with the folder %s (label %d)' % (
        stated, stated_name, folder, label + 1)
  return VideoEntry(path, folder, label), None


def _read_video_list(path, labelled, class_names, taken, problems):
  """Reads one trainlist/testlist; `taken` maps paths already listed to their list's name."""
  label_of = {name: label for label, name in enumerate(class_names)}
  list_name = os.path.basename(path)
  entries = []
  for number, text in read_lines(path):
    entry, reason = _list_entry(text, labelled, label_of, class_names)
    if entry is not None and entry.relative_path in taken:
      entry, reason = None, 'already listed in %s' % taken[entry.relative_path]
    if entry is None:
      problems.append((text.split()[0], '%s line %d: %s' % (list_name, number, reason)))
      continue
    taken[entry.relative_path] = list_name
    entries.append(entry)
  return tuple(entries)


def read_ucf_style_lists(splits_dir, split):
  """classInd.txt, trainlist%02d.txt and testlist%02d.txt -> SplitLists."""
  class_names = _read_class_index(os.path.join(splits_dir, CLASS_INDEX_FILENAME))
  taken, problems = {}, []
  splits = {}
  for split_name, labelled in (('train', True), ('test', False)):
    path = os.path.join(splits_dir, '%slist%02d.txt' % (split_name, split))
    splits[split_name] = _read_video_list(path, labelled, class_names, taken, problems)
  return SplitLists(class_names, splits, tuple(problems))


def is_video_file(name):
  """True for a non-hidden file name with one of VIDEO_EXTENSIONS (any case)."""
  return not name.startswith('.') and os.path.splitext(name)[1].lower() in VIDEO_EXTENSIONS


def scan_tree(video_dir):
  """Returns (class names, [VideoEntry] in class then name order, [(path, reason)])."""
  names = sorted(os.listdir(video_dir))
  class_names = tuple(name for name in names
                      if not name.startswith('.') and os.path.isdir(os.path.join(video_dir, name)))
  if not class_names:
    raise DatasetError('--video_dir=%s has no class sub-directories; expected '
                       '%s/<class>/<video>' % (video_dir, video_dir.rstrip('/')))
  problems = [(name, 'not inside a class folder') for name in names
              if not name.startswith('.') and name not in class_names]
  entries = []
  for label, class_name in enumerate(class_names):
    for name in sorted(os.listdir(os.path.join(video_dir, class_name))):
      path = '%s/%s' % (class_name, name)
      if name.startswith('.'):
        continue
      if os.path.isdir(os.path.join(video_dir, class_name, name)):
        problems.append((path, 'a directory inside a class folder; videos must be directly '
                               'in <class>/'))
      elif not is_video_file(name):
        problems.append((path, 'not a video file (extensions: %s)' % ' '.join(VIDEO_EXTENSIONS)))
      else:
        entries.append(VideoEntry(path, class_name, label))
  return class_names, entries, problems


_HMDB_FILE = re.compile(r'^(?P<class_name>.+)_test_split(?P<split>\d+)\.txt$')
_HMDB_CODES = {'1': 'train', '2': 'test'}  # '0': not used in this split


def _hmdb_class_names(splits_dir, split):
  """Sorted class names of the `<class>_test_split<N>.txt` files; every one needs split N."""
  splits_of = {}
  for name in os.listdir(splits_dir):
    match = _HMDB_FILE.match(name)
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


def read_hmdb_style_lists(splits_dir, split):
  """One `<class>_test_split<N>.txt` per class in `splits_dir`, lines "<video>.avi <code>"
  (1 train, 2 test, 0 unused); labels follow the sorted class names. -> SplitLists."""
  class_names = _hmdb_class_names(splits_dir, split)
  splits = {'train': [], 'test': []}
  problems, taken = [], {}
  for label, class_name in enumerate(class_names):
    list_name = '%s_test_split%d.txt' % (class_name, split)
    for number, text in read_lines(os.path.join(splits_dir, list_name)):
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
      if parts[1] in _HMDB_CODES:
        splits[_HMDB_CODES[parts[1]]].append(VideoEntry(path, class_name, label))
  return SplitLists(class_names, {name: tuple(entries) for name, entries in splits.items()},
                    tuple(problems))
