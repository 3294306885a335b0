"""Writing sharded TFRecord files (named as `datasets/formats/shards.py` says), atomically.

The writer only sees serialized records (bytes), image or video. A shard is written to a
hidden temporary name in the output directory and renamed to its final name only once
complete, so an interrupted run never leaves a half-written shard under a final name (a
killed process may leave a hidden `.<name>.tmp-*` file, which no reader's glob matches).
"""

import itertools
import os
import uuid

from datasets.formats import converted_data
from datasets.formats.shards import (INDEX_SUFFIX, MAX_SHARDS, SHARD_RE, SPLIT_NAME_RE,
                                     shard_name)
from tf_compat import tf


def _check_arguments(split_name, num_shards):
  if not isinstance(split_name, str) or not SPLIT_NAME_RE.match(split_name):
    raise ValueError('split name %r is not accepted: use letters, digits, "_" or "." '
                     '(no "-", which separates the parts of a shard name)' % (split_name,))
  if not isinstance(num_shards, int) or not 1 <= num_shards <= MAX_SHARDS:
    raise ValueError('num_shards=%r is not accepted: use an integer from 1 to %d'
                     % (num_shards, MAX_SHARDS))


def _record_count(records, num_records):
  if num_records is not None:
    if not isinstance(num_records, int) or num_records < 0:
      raise ValueError('num_records=%r is not accepted: use an integer >= 0' % (num_records,))
    return num_records
  try:
    return len(records)
  except TypeError:
    raise ValueError('num_records is required when records is an iterator without len(); '
                     'it decides the contiguous chunk each shard holds') from None


def _write_temporary(path, records, expected):
  """Writes `expected` records to `path` (None: all there are); raises if the iterable
  runs short."""
  written = 0
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)
      written += 1
  if expected is not None and written != expected:
    raise ValueError('the records ran out: shard %s got %d of its %d records'
                     % (os.path.basename(path), written, expected))


def _remove_quietly(path):
  try:
    tf.io.gfile.remove(path)
  except tf.errors.NotFoundError:
    pass


def _remove_stale_shards(output_dir, split_name, keep):
  """Removes shards of this split left by an earlier run with another shard count."""
  keep = {os.path.basename(path) for path in keep}
  for name in tf.io.gfile.listdir(output_dir):
    match = SHARD_RE.match(name)
    if match and match.group('split') == split_name and name not in keep:
      _remove_quietly(os.path.join(output_dir, name))
      _remove_quietly(os.path.join(output_dir, name + INDEX_SUFFIX))


def write_shards(records, output_dir, split_name, num_shards, num_records=None):
  """Writes serialized records into `<output_dir>/<split_name>-0000i-of-000NN`.

  Records go to shards in order, in contiguous chunks whose sizes differ by at most one
  (shard i holds records [i*n//N, (i+1)*n//N)). Shards of the same split left by an earlier
  run with a different shard count are removed once the new set is complete.

  Args:
    records: iterable of bytes (serialized tf.train.Example / SequenceExample).
    output_dir: directory, created if missing.
    split_name: e.g. 'train'; letters, digits, '_' or '.'.
    num_shards: number of shards, 1..99999 (shards may be empty if records are fewer).
    num_records: number of records; required only if `records` has no len().

  Returns:
    The shard paths, in index order.

  Raises:
    ValueError: bad arguments, or `records` yields fewer or more than `num_records`.
    Whatever `records` raises; the shard being written is then removed.
  """
  _check_arguments(split_name, num_shards)
  total = _record_count(records, num_records)
  tf.io.gfile.makedirs(output_dir)
  iterator = iter(records)
  paths = []
  for index in range(num_shards):
    chunk = (index + 1) * total // num_shards - index * total // num_shards
    last = index == num_shards - 1
    paths.append(write_shard(itertools.islice(iterator, chunk), output_dir, split_name,
                             index, num_shards, num_records=chunk,
                             check_exhausted=iterator if last else None))
  _remove_stale_shards(output_dir, split_name, keep=paths)
  return paths


def write_shard(records, output_dir, split_name, index, num_shards, num_records,
                check_exhausted=None):
  """Writes one shard atomically: to a temporary name, renamed when complete.

  Args:
    records: iterable of exactly `num_records` serialized records (None: all it yields).
    output_dir, split_name, index, num_shards: name the shard
      (`<output_dir>/<split_name>-<index>-of-<num_shards>`).
    check_exhausted: optional iterator that must be empty after this shard (the source
      of all records, when this is the last shard).

  Returns:
    The final path. On any failure nothing is left under the final name or the
    temporary one.
  """
  _check_arguments(split_name, num_shards)
  tf.io.gfile.makedirs(output_dir)
  final = os.path.join(output_dir, shard_name(split_name, index, num_shards))
  return write_record_file(final, records, num_records, check_exhausted)


def write_record_file(final, records, num_records, check_exhausted=None):
  """Writes one TFRecord file atomically: to a hidden temporary name beside `final`,
  renamed when complete (a shard, or a shard's index). Arguments as write_shard's, but
  num_records may be None: every record of the iterable, however many.

  Returns:
    `final`. On any failure nothing is left under the final name or the temporary one.
  """
  temporary = os.path.join(os.path.dirname(final), '.%s.tmp-%s' % (
      os.path.basename(final), uuid.uuid4().hex[:12]))
  try:
    _write_temporary(temporary, records, num_records)
    if check_exhausted is not None and next(check_exhausted, None) is not None:
      raise ValueError('records yielded more than num_records')
    tf.io.gfile.rename(temporary, final, overwrite=True)
  except BaseException:
    # Also on KeyboardInterrupt: the temporary file must not outlive the failed write.
    _remove_quietly(temporary)
    raise
  return final


def write_converted_dataset(output_dir, dataset_name, class_names, num_channels, splits,
                            num_shards, modality=None, extra=None):
  """Writes all shards, then labels.txt, then dataset_info.json (last: it marks completion).

  Args:
    output_dir: created if missing; an earlier conversion there is replaced.
    dataset_name: registered name recorded in dataset_info.json.
    class_names: list of names, index = label.
    num_channels: channels of every decoded image.
    splits: {split_name: (iterable of serialized records, number of records)}.
    num_shards: upper bound of shards per split; a split never gets more shards than
      records (and at least one), so no reader is handed an empty shard.
    modality: None for images; 'rgb' (3 channels) or 'flow' (2) for video clips, whose
      info also records `"format_version": VIDEO_FORMAT_VERSION` (the caller writes
      records in that layout, datasets/formats/video_records.py).
    extra: optional {key: JSON value} stored in dataset_info.json beside the standard keys
      (e.g. the source split number); it may not override them.

  Returns:
    {split_name: list of shard paths}.

  Raises:
    ValueError: a modality that disagrees with num_channels, or extra overriding a key;
      nothing is written then.
  """
  split_sizes = {name: count for name, (_, count) in splits.items()}
  converted_data.info_record(dataset_name, class_names, num_channels, split_sizes, modality,
                             extra)
  tf.io.gfile.makedirs(output_dir)
  info_path = os.path.join(output_dir, converted_data.INFO_FILENAME)
  if tf.io.gfile.exists(info_path):
    tf.io.gfile.remove(info_path)  # The old data is about to be replaced, shard by shard.
  written = {}
  for split_name, (records, num_records) in splits.items():
    written[split_name] = write_shards(
        records, output_dir, split_name, max(1, min(num_shards, num_records)), num_records)
  converted_data.write_converted_info(output_dir, dataset_name, class_names, num_channels,
                                      split_sizes, modality=modality, extra=extra)
  return written
