"""A held-out split of whole sources: clips of one source never land in both splits.

UCF101 cuts each source video into clips named `v_<Class>_gNN_cNN.avi` (group NN, clip
NN) and its official splits keep a group on one side; a split of single clips puts near
copies of one scene in train and test and inflates test accuracy. `grouped_split` reads a
video's source from its file name with the `--group_by` regular expression (first capture
group, or the whole match), within its class; a name it does not match is a source of its
own. The held-out fraction and seeded order are `stratified_split`'s over the groups, so a
tree without group names splits exactly as single videos always did. Pure Python.
"""

import dataclasses
import re

from datasets.formats.dataset_split import DatasetError
from datasets.splits import video_splits
from datasets.splits.stratified_split import stratified_split

__all__ = ['DEFAULT_GROUP_BY', 'GroupCounts', 'compile_group_by', 'grouped_split', 'split_tree']

DEFAULT_GROUP_BY = r'_g(\d+)_'  # UCF101's v_ApplyEyeMakeup_g08_c01.avi -> group '08'


@dataclasses.dataclass(frozen=True)
class GroupCounts:
  """How a split of groups went: the pattern, groups per split, and the videos that
  matched no group (each one a group of its own, counted in train/test too)."""
  group_by: str
  train: int
  test: int
  ungrouped: int

  def line(self):
    """One line for the converter's log."""
    if not self.group_by:
      return ('split by single videos (--group_by is empty): train %d, test %d videos'
              % (self.train, self.test))
    return ('split by source (--group_by=%s): train %d groups, test %d groups, none in both; '
            '%d videos matched no group (each its own)'
            % (self.group_by, self.train, self.test, self.ungrouped))


def compile_group_by(group_by):
  """The pattern compiled, or None for '' (no grouping); DatasetError if it is not one."""
  if not isinstance(group_by, str):
    raise DatasetError('--group_by=%r is not accepted: use a regular expression (or an empty '
                       'value for single videos)' % (group_by,))
  if not group_by:
    return None
  try:
    return re.compile(group_by)
  except re.error as error:
    raise DatasetError('--group_by=%s is not accepted: not a regular expression (%s); use one '
                       'whose first group (or whole match) in a file name names the source, '
                       'e.g. %s' % (group_by, error, DEFAULT_GROUP_BY)) from None


def _group_key(entry, pattern):
  """(class, source) of a VideoEntry, or (class, None, path) when it matches no group."""
  name = entry.relative_path.rsplit('/', 1)[-1]
  match = pattern.search(name) if pattern is not None else None
  if match is None:
    return (entry.class_name, None, entry.relative_path)
  return (entry.class_name, match.group(1) if pattern.groups else match.group(0))


def grouped_split(entries, test_fraction, seed, group_by=DEFAULT_GROUP_BY):
  """Holds out round(G * test_fraction) of the G groups (at most G - 1), stratified by
  class and seeded as `stratified_split`; each class keeps a training group.

  Args:
    entries: VideoEntries in a fixed order (class, then name).
    test_fraction: 0 <= f < 1, checked by the caller.
    seed: int.
    group_by: pattern string (see the module docstring); '' splits single videos.

  Returns:
    (train entries, test entries, GroupCounts): groups in the seeded order, each group's
    videos together in `entries` order.
  """
  pattern = compile_group_by(group_by)
  groups = {}
  for entry in entries:
    groups.setdefault(_group_key(entry, pattern), []).append(entry)
  keys = list(groups)
  # At most G - 1 test groups, so stratified_split leaves every class a training group.
  num_test = min(int(len(keys) * test_fraction + 0.5), max(len(keys) - 1, 0))
  train, test = stratified_split([key[0] for key in keys], num_test, seed)
  counts = GroupCounts(group_by, len(train), len(test),
                       sum(1 for key in keys if key[1] is None) if pattern else 0)
  return (tuple(e for i in train for e in groups[keys[i]]),
          tuple(e for i in test for e in groups[keys[i]]), counts)


def split_tree(dataset_name, video_dir, test_fraction, seed, group_by=DEFAULT_GROUP_BY):
  """The `<video_dir>/<class>/<video>` tree, its videos grouped by source (`group_by`) and
  round(G * test_fraction) of the G groups held out for test (`grouped_split`); entries
  come in that seeded order, a group's videos together.
  -> video_splits.SplitLists (with `groups`); raises DatasetError."""
  if (isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float))
      or not 0 <= test_fraction < 1):
    raise DatasetError('--test_fraction=%r is not accepted: use a number >= 0 and < 1'
                       % (test_fraction,))
  video_dir = video_splits.existing_dir(
      'video_dir', video_dir, dataset_name,
      'a directory with one sub-directory of videos per class')
  class_names, entries, problems = video_splits.scan_tree(video_dir)
  if not entries:
    raise DatasetError('--video_dir=%s holds no video files (%s) in its class folders'
                       % (video_dir, ' '.join(video_splits.VIDEO_EXTENSIONS)))
  train, test, groups = grouped_split(entries, test_fraction, seed, group_by)
  return video_splits.SplitLists(class_names, {'train': train, 'test': test},
                                 tuple(problems), groups)
