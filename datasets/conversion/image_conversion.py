"""Image datasets -> sharded image records, labels.txt and dataset_info.json.

The work of `python -m datasets.convert_images`: `ImageConversion` holds its flags,
`convert_images(config)` runs one conversion through the dataset's registered converter
(`convert_digits`, `convert_image_folder`), `convert` takes the same settings as plain
arguments, and `print_summary` prints what was written and what was skipped.
"""

import dataclasses
import sys
from typing import Optional

from core.params import param
from datasets import dataset_factory
from datasets.dataset_split import DatasetError

__all__ = ['ImageConversion', 'convert_images', 'convert', 'print_summary']

_MAX_SHARDS = 99999


@dataclasses.dataclass(frozen=True)
class ImageConversion:
  """One image conversion; each field is also a flag of `python -m datasets.convert_images`."""
  # Source.
  dataset_name: Optional[str] = param(
      None, 'Dataset to convert: %s (video datasets: python -m datasets.convert_videos).'
      % ', '.join(dataset_factory.list_datasets(dataset_factory.IMAGE)))
  image_dir: Optional[str] = param(
      None, 'image_folder only: <image_dir>/<class>/<image> tree of images.')
  # Output.
  output_dir: Optional[str] = param(None, 'Directory for the converted data.')
  num_shards: int = param(dataset_factory.DEFAULT_NUM_SHARDS,
                          'Shards per split, at most (never more than the split has records).')
  # Split (image_folder only).
  test_fraction: float = param(dataset_factory.DEFAULT_TEST_FRACTION,
                               'image_folder only: fraction of the images held out for testing.')
  seed: int = param(dataset_factory.DEFAULT_SEED,
                    'image_folder only: seed of the train/test assignment.')


def convert_images(config):
  """Runs the conversion `config` (an ImageConversion) describes; see `convert`."""
  return convert(config.dataset_name, config.output_dir, image_dir=config.image_dir,
                 num_shards=config.num_shards, test_fraction=config.test_fraction,
                 seed=config.seed)


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
    DatasetError (a ConfigError): a bad argument; nothing has been written then.
    OSError, tf.errors.OpError: the output could not be written (no shard is left
      half-written, and dataset_info.json is absent until a run completes).
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


def print_summary(result):
  """Prints skipped files (stderr) and a one-line summary (stdout) of a ConversionResult."""
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
