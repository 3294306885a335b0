"""Shard files on disk: `<split>-00000-of-000NN`, a video shard's index `<shard>.index`.

What every reader, writer and check agrees on about a split's TFRecord files: their names
(`shard_name`, `parse_shard_name`), the glob of one complete set (`shard_file_pattern`),
finding that set (`find_shards`, which refuses mixed or incomplete sets) and the index
file's suffix. Writing them is `datasets/conversion/shard_writer.py`'s.
"""

import os
import re

from tf_compat import tf

# '-' separates the parts of a shard name, so split names must not contain it.
SPLIT_NAME_RE = re.compile(r'^[A-Za-z0-9_.]+$')
SHARD_RE = re.compile(r'^(?P<split>[A-Za-z0-9_.]+)-(?P<index>\d{5})-of-(?P<count>\d{5})$')
MAX_SHARDS = 99999  # five digits in the name
# A video shard's index is a file beside it, `<shard>.index` (formats/video_records.py).
INDEX_SUFFIX = '.index'


def shard_name(split_name, index, num_shards):
  """'train', 0, 4 -> 'train-00000-of-00004'."""
  return '%s-%05d-of-%05d' % (split_name, index, num_shards)


def parse_shard_name(name):
  """'train-00000-of-00004' -> ('train', 0, 4); None for a name that is not a shard's."""
  match = SHARD_RE.match(name)
  if match is None:
    return None
  return match.group('split'), int(match.group('index')), int(match.group('count'))


def shard_file_pattern(output_dir, split_name, num_shards):
  """Glob matching exactly the `num_shards` shards of one split (and no stale set)."""
  return os.path.join(output_dir, '%s-?????-of-%05d' % (split_name, num_shards))


def find_shards(output_dir, split_name):
  """Returns the sorted shard paths of one split, or [] if there are none.

  Raises:
    ValueError: the shards are not one complete set: mixed `-of-N` counts (two runs) or
      missing indices.
  """
  found = {}
  for name in tf.io.gfile.listdir(output_dir):
    match = SHARD_RE.match(name)
    if match and match.group('split') == split_name:
      found[name] = (int(match.group('index')), int(match.group('count')))
  if not found:
    return []
  counts = sorted({count for _, count in found.values()})
  if len(counts) > 1:
    raise ValueError('%s holds %s shards from different runs (-of-%s); re-run the conversion'
                     % (output_dir, split_name, ', -of-'.join('%05d' % c for c in counts)))
  count = counts[0]
  indices = {index for index, _ in found.values()}
  if any(index >= count for index in indices):
    raise ValueError('%s holds a %s shard numbered beyond its -of-%05d count; re-run the '
                     'conversion' % (output_dir, split_name, count))
  missing = sorted(set(range(count)) - indices)
  if missing:
    raise ValueError('%s has %d of the %d %s shards; missing %s; re-run the conversion'
                     % (output_dir, len(found), count, split_name,
                        shard_name(split_name, missing[0], count)))
  return [os.path.join(output_dir, name) for name in sorted(found)]

