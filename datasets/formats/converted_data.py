"""The on-disk layout of a converted dataset, written by converters, read by `get_split`.

A converted dataset directory holds, per split, TFRecord shards `<split>-0000i-of-000NN`,
plus `labels.txt` (slim's format, one `index:name` per line) and `dataset_info.json`
(`{"dataset_name", "num_classes", "num_channels", "splits": {split: size}}`, plus
`"modality": "rgb" | "flow"`, the record `"format_version"` and any converter metadata for
video datasets). The info file is removed when a conversion starts and written last, so
its presence means the conversion finished.

Video records have a format version (`VIDEO_FORMAT_VERSION`; layout in
`datasets/formats/video_records.py`): data of another version is refused in one line naming the
command that migrates it.
"""

import dataclasses
import json
import os
from typing import Dict, Tuple

from core.errors import DataError
from core.files import write_text_atomically  # also converted_data.write_text_atomically
from datasets.formats import shards
from datasets.formats.dataset_split import DatasetError, DatasetSplit
from tf_compat import tf

LABELS_FILENAME = 'labels.txt'
INFO_FILENAME = 'dataset_info.json'
_INFO_KEYS = ('dataset_name', 'num_classes', 'num_channels', 'splits')
MODALITY_CHANNELS = {'rgb': 3, 'flow': 2}  # video modality -> channels of a decoded frame
# The video record layout: 1 was one record per whole video (no "format_version" key),
# 2 chunked records with an index per shard.
VIDEO_FORMAT_VERSION = 2
MIGRATE_MODULE = 'datasets.migrate_video_records'


@dataclasses.dataclass(frozen=True)
class ConversionResult:
  """What a converter wrote, and what it left out.

  Attributes:
    dataset_name: registered name.
    output_dir: the converted data directory.
    split_sizes: {split_name: records written}.
    num_classes: number of classes.
    skipped: ((path, reason), ...) input files that were not readable images.
    empty_classes: names of classes left without any readable image.
  """
  dataset_name: str
  output_dir: str
  split_sizes: Dict[str, int] = dataclasses.field(hash=False)
  num_classes: int
  skipped: Tuple[Tuple[str, str], ...] = ()
  empty_classes: Tuple[str, ...] = ()


def convert_command(dataset_name, output_dir, extra_flags=(), module='datasets.convert_images'):
  """The command line that creates `output_dir` for `dataset_name` (for error messages)."""
  return ' '.join(['python -m %s' % module, '--dataset_name=%s' % dataset_name]
                  + list(extra_flags) + ['--output_dir=%s' % output_dir])


def write_labels_file(labels_to_names, dataset_dir):
  """Writes slim's labels.txt: `index:name` per line, in index order."""
  lines = ['%d:%s\n' % (label, labels_to_names[label]) for label in sorted(labels_to_names)]
  write_text_atomically(os.path.join(dataset_dir, LABELS_FILENAME), ''.join(lines))


def read_labels_file(dataset_dir, remedy='re-run the conversion'):
  """Reads labels.txt into {int label: name}; a name may itself contain ':'. remedy ends
  the error's line: what rewrites the file where it was found. DatasetError (a user
  mistake, status 2) when the file is missing: not a converted dataset directory;
  DataError (damaged data, status 3) when a line is not `index:name`."""
  path = os.path.join(dataset_dir, LABELS_FILENAME)
  if not tf.io.gfile.exists(path):
    raise DatasetError('%s is missing; %s' % (path, remedy))
  labels_to_names = {}
  with tf.io.gfile.GFile(path, 'r') as handle:
    for line_number, line in enumerate(handle.read().splitlines(), start=1):
      index, colon, name = line.partition(':')
      if not colon or not index.strip().isdigit():
        raise DataError('%s line %d is %r, expected "index:name"; %s'
                           % (path, line_number, line, remedy))
      labels_to_names[int(index)] = name
  return labels_to_names


def read_dataset_info(dataset_dir):
  """Returns the parsed dataset_info.json, or None if there is none; DataError (damaged
  data, status 3) when it is not valid JSON or lacks a standard key."""
  path = os.path.join(dataset_dir, INFO_FILENAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, 'r') as handle:
    try:
      info = json.loads(handle.read())
    except ValueError as error:
      raise DataError('%s is not valid JSON (%s); re-run the conversion'
                         % (path, error)) from None
  missing = [key for key in _INFO_KEYS if not isinstance(info, dict) or key not in info]
  if missing or not isinstance(info['splits'], dict):
    raise DataError('%s lacks %s; re-run the conversion'
                       % (path, ', '.join(missing) or 'a "splits" object'))
  return info


def info_record(dataset_name, class_names, num_channels, split_sizes, modality, extra):
  """The dataset_info.json content; checks modality and extra before anything is written
  (a ValueError)."""
  info = {'dataset_name': dataset_name, 'num_classes': len(class_names),
          'num_channels': num_channels, 'splits': dict(split_sizes)}
  if modality is not None:
    if not isinstance(modality, str) or MODALITY_CHANNELS.get(modality) != num_channels:
      raise ValueError('modality=%r with num_channels=%r is not accepted; valid: %s'
                       % (modality, num_channels, ', '.join(
                           '%s with %d' % item for item in MODALITY_CHANNELS.items())))
    info['modality'] = modality
    info['format_version'] = VIDEO_FORMAT_VERSION  # The record layout of video data.
  clashes = sorted(set(extra or ()) & (set(_INFO_KEYS) | {'modality', 'format_version'}))
  if clashes:
    raise ValueError('extra may not set %s: they are the standard keys'
                     % ', '.join(clashes))
  info.update(extra or {})
  return info


def write_converted_info(output_dir, dataset_name, class_names, num_channels, split_sizes,
                         modality=None, extra=None):
  """Writes labels.txt, then dataset_info.json, for shards a converter has already written.

  For converters that write their own shards (e.g. resumably, shard by shard); the caller
  removes any old dataset_info.json before its first shard. Arguments as in
  conversion/shard_writer.write_converted_dataset, with `split_sizes` {split_name: number
  of records}.

  Raises:
    ValueError: a modality that disagrees with num_channels, or extra overriding a key;
      nothing is written then.
  """
  info = info_record(dataset_name, class_names, num_channels, split_sizes, modality, extra)
  write_labels_file(dict(enumerate(class_names)), output_dir)
  write_text_atomically(os.path.join(output_dir, INFO_FILENAME),
                        json.dumps(info, indent=2) + '\n')


def _split_shards(dataset_dir, split_name, command):
  try:
    found = shards.find_shards(dataset_dir, split_name)
  except ValueError as error:
    raise DatasetError('%s: %s' % (error, command)) from None
  if not found:
    raise DatasetError('%s has no %s shards (%s-00000-of-000NN) although %s is present; '
                       're-run: %s' % (dataset_dir, split_name, split_name, INFO_FILENAME,
                                       command))
  return found


def _checked_info(dataset_name, dataset_dir, command):
  if not tf.io.gfile.isdir(dataset_dir):
    raise DatasetError('dataset_dir %s does not exist; create it with: %s'
                       % (dataset_dir, command))
  info = read_dataset_info(dataset_dir)
  if info is None:
    raise DatasetError('%s holds no converted %s data (no %s, so no conversion finished '
                       'there); create it with: %s'
                       % (dataset_dir, dataset_name, INFO_FILENAME, command))
  if info['dataset_name'] != dataset_name:
    raise DatasetError('%s holds converted %r data, not %r; use --dataset_name=%s or '
                       'create %s data with: %s' % (dataset_dir, info['dataset_name'],
                                                   dataset_name, info['dataset_name'],
                                                   dataset_name, command))
  return info


def _checked_modality(info, dataset_dir, command):
  """None for image data; else 'rgb' or 'flow', agreeing with num_channels."""
  modality = info.get('modality')
  if modality is not None and (not isinstance(modality, str)
                               or MODALITY_CHANNELS.get(modality) != info['num_channels']):
    raise DatasetError('%s has modality %r with num_channels %r; valid: %s; re-run: %s'
                       % (os.path.join(dataset_dir, INFO_FILENAME), modality,
                          info['num_channels'], ', '.join('%s with %d' % item for item
                                                          in MODALITY_CHANNELS.items()),
                          command))
  return modality


def load_split(dataset_name, split_name, dataset_dir, command):
  """Checks a converted dataset directory and describes one of its splits.

  Args:
    dataset_name: registered name; must match dataset_info.json.
    split_name: must be listed in dataset_info.json and have a complete set of shards.
    dataset_dir: the converted data directory.
    command: the conversion command that creates `dataset_dir`, quoted in errors.

  Returns:
    A DatasetSplit; its modality is None for image data, 'rgb' or 'flow' for video clips.

  Raises:
    DatasetError: anything missing or inconsistent, in one line naming the fix.
  """
  info = _checked_info(dataset_name, dataset_dir, command)
  if split_name not in info['splits']:
    raise DatasetError('%s lists no %r split (it has: %s); re-run: %s'
                       % (os.path.join(dataset_dir, INFO_FILENAME), split_name,
                          ', '.join(sorted(info['splits'])), command))
  split_shards = _split_shards(dataset_dir, split_name, command)
  labels_to_names = read_labels_file(dataset_dir)
  if sorted(labels_to_names) != list(range(info['num_classes'])):
    raise DatasetError('%s does not name labels 0..%d of %s; re-run: %s'
                       % (os.path.join(dataset_dir, LABELS_FILENAME), info['num_classes'] - 1,
                          INFO_FILENAME, command))
  return DatasetSplit(
      name=dataset_name, split_name=split_name, dataset_dir=dataset_dir,
      file_pattern=shards.shard_file_pattern(dataset_dir, split_name, len(split_shards)),
      num_samples=int(info['splits'][split_name]), num_classes=int(info['num_classes']),
      labels_to_names=labels_to_names, num_channels=int(info['num_channels']),
      modality=_checked_modality(info, dataset_dir, command))


def load_video_split(dataset_name, split_name, dataset_dir, command, num_classes=None):
  """`load_split` for video clips: the data must have a modality (and `num_classes`, if set).

  Raises:
    DatasetError: as load_split, or image data, or another number of classes.
    DataError: records of another format version; the message names the command that
      migrates older ones.
  """
  split = load_split(dataset_name, split_name, dataset_dir, command)
  if split.modality is None:
    raise DatasetError('%s has no modality (rgb or flow): it is not converted video data; '
                       're-run: %s' % (os.path.join(dataset_dir, INFO_FILENAME), command))
  check_format_version(read_dataset_info(dataset_dir), dataset_dir)
  if num_classes is not None and split.num_classes != num_classes:
    raise DatasetError('%s describes %s with %d classes; %s has %d; re-run: %s'
                       % (os.path.join(dataset_dir, INFO_FILENAME), dataset_name,
                          split.num_classes, dataset_name, num_classes, command))
  return split


def migrate_command(dataset_dir):
  """The command that rewrites older video records in `dataset_dir` in today's layout."""
  return 'python -m %s --dataset_dir=%s --output_dir=%s_v%d' % (
      MIGRATE_MODULE, dataset_dir, dataset_dir.rstrip('/'), VIDEO_FORMAT_VERSION)


def check_format_version(info, dataset_dir):
  """DataError unless the video records are in today's layout (VIDEO_FORMAT_VERSION)."""
  version = info.get('format_version', 1)
  if version == VIDEO_FORMAT_VERSION:
    return
  path = os.path.join(dataset_dir, INFO_FILENAME)
  if isinstance(version, int) and version < VIDEO_FORMAT_VERSION:
    raise DataError('%s holds video records of format %d (one record per whole video); '
                    'this version reads format %d (chunked, with an index); migrate them '
                    'with: %s' % (path, version, VIDEO_FORMAT_VERSION,
                                  migrate_command(dataset_dir)))
  raise DataError('%s has format_version %r, which this version cannot read (it reads %d); '
                  'use the slimdeploy that wrote it, or re-run the conversion'
                  % (path, version, VIDEO_FORMAT_VERSION))


def check_split_name(dataset_name, split_name, split_names):
  """Raises DatasetError unless `split_name` is one of `split_names` (listed, sorted)."""
  if split_name not in split_names:
    raise DatasetError('split_name %r is not %s %s split; valid splits: %s'
                       % (split_name, 'an' if dataset_name[0] in 'aeioh' else 'a',
                          dataset_name, ', '.join(sorted(split_names))))
