"""Converts a dataset into sharded image records, labels.txt and dataset_info.json.

    python -m datasets.convert_images --dataset_name=digits --output_dir=/tmp/digits
    python -m datasets.convert_images --dataset_name=image_folder --image_dir=photos \\
        --output_dir=/tmp/photos --test_fraction=0.2 --seed=0

digits takes a few seconds on one CPU core. Mistakes print one line `error: ...` and exit
with status 2 without writing anything. Re-running over a finished output replaces it.
"""

import sys

from absl import app
from absl import flags

from datasets import dataset_factory
from datasets.dataset_split import DatasetError
from core.params import parse_flags
from tf_compat import tf

_MAX_SHARDS = 99999


def convert(dataset_name, output_dir, image_dir=None,
            num_shards=dataset_factory.DEFAULT_NUM_SHARDS,
            test_fraction=dataset_factory.DEFAULT_TEST_FRACTION,
            seed=dataset_factory.DEFAULT_SEED):
  """Converts dataset `dataset_name` into `output_dir`.

  Args:
    dataset_name: a name from dataset_factory.list_datasets().
    output_dir: where shards, labels.txt and dataset_info.json go; created if missing.
    image_dir: the class-folder tree (image_folder only).
    num_shards: shards per split, at most (a split never gets more shards than records).
    test_fraction: fraction of images held out for the test split (image_folder only).
    seed: seed of the train/test assignment (image_folder only).

  Returns:
    A ConversionResult.

  Raises:
    DatasetError (a ValueError): a bad argument; nothing has been written then.
  """
  if not dataset_name:
    raise DatasetError('--dataset_name is required; valid names: %s'
                       % ', '.join(dataset_factory.list_datasets()))
  entry = dataset_factory.get_entry(dataset_name)
  if not output_dir:
    raise DatasetError('--output_dir is required: the directory the converted data goes to')
  if isinstance(num_shards, bool) or not isinstance(num_shards, int) or not (
      1 <= num_shards <= _MAX_SHARDS):
    raise DatasetError('--num_shards=%r is not accepted: use an integer from 1 to %d'
                       % (num_shards, _MAX_SHARDS))
  if entry.convert is None:
    raise DatasetError('%s is a video dataset; convert it with: python -m '
                       'datasets.convert_videos --dataset_name=%s ... --output_dir=%s '
                       '(convert_images handles %s)'
                       % (dataset_name, dataset_name, output_dir,
                          ', '.join(dataset_factory.list_datasets(dataset_factory.IMAGE))))
  return entry.convert(output_dir, image_dir=image_dir, num_shards=num_shards,
                       test_fraction=test_fraction, seed=seed)


def _report(result):
  """Prints skipped files (stderr) and a one-line summary (stdout)."""
  for path, reason in result.skipped:
    print('skipped %s: %s' % (path, reason), file=sys.stderr)
  if result.empty_classes:
    print('warning: no readable image in class folder(s): %s'
          % ', '.join(result.empty_classes), file=sys.stderr)
  sizes = ', '.join('%s %d' % item for item in result.split_sizes.items())
  skipped = ('; skipped %d unreadable file(s), listed above' % len(result.skipped)
             if result.skipped else '')
  print('converted %s into %s: %s records, %d classes%s'
        % (result.dataset_name, result.output_dir, sizes, result.num_classes, skipped))


def _define_flags():
  flags.DEFINE_string('dataset_name', None,
                      'Dataset to convert: %s.' % ', '.join(dataset_factory.list_datasets()))
  flags.DEFINE_string('output_dir', None, 'Directory for the converted data.')
  flags.DEFINE_string('image_dir', None,
                      'image_folder only: <image_dir>/<class>/<image> tree of images.')
  flags.DEFINE_integer('num_shards', dataset_factory.DEFAULT_NUM_SHARDS,
                       'Shards per split, at most (never more than the split has records).')
  flags.DEFINE_float('test_fraction', dataset_factory.DEFAULT_TEST_FRACTION,
                     'image_folder only: fraction of the images held out for testing.')
  flags.DEFINE_integer('seed', dataset_factory.DEFAULT_SEED,
                       'image_folder only: seed of the train/test assignment.')


_parse_flags = parse_flags  # One `error:` line and exit status 2 on a bad flag.


def main(argv):
  if len(argv) > 1:
    print('error: unexpected arguments %s; all settings are --flags' % ' '.join(argv[1:]),
          file=sys.stderr)
    return 2
  flag_values = flags.FLAGS
  try:
    result = convert(flag_values.dataset_name, flag_values.output_dir,
                     image_dir=flag_values.image_dir, num_shards=flag_values.num_shards,
                     test_fraction=flag_values.test_fraction, seed=flag_values.seed)
  except DatasetError as error:
    print('error: %s' % error, file=sys.stderr)
    return 2
  except (OSError, tf.errors.OpError) as error:
    # Disk full, permission denied, a file gone between passes: the environment, not a bug.
    # No shard is left half-written, and dataset_info.json is absent until a run completes.
    print('error: conversion into %s failed: %s' % (flag_values.output_dir, error),
          file=sys.stderr)
    return 1
  _report(result)
  return 0


if __name__ == '__main__':
  _define_flags()
  app.run(main, flags_parser=_parse_flags)
