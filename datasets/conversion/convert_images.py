"""Image datasets -> sharded image records, labels.txt and dataset_info.json.

The work of `python -m datasets.convert_images`: `ImageConversion` holds its flags,
`convert_images(config)` runs one conversion through the dataset's converter in
`CONVERTERS` (`convert_digits`, `convert_image_folder`; a new image dataset adds its own
there), `convert` takes the same settings as plain arguments, and `print_summary` prints
what was written and what was skipped.
"""

import dataclasses
import sys
from typing import Optional

from core.params import param
from datasets import dataset_factory, digits, image_folder
from datasets.conversion import convert_digits, convert_image_folder
from datasets.formats.dataset_split import DatasetError

__all__ = ['ImageConversion', 'CONVERTERS', 'convert_images', 'convert', 'print_summary']

_MAX_SHARDS = 99999
# Conversion defaults, shared with the convert_images CLI. The digits split is fixed and
# equals these (1437/360 is 0.2 of 1,797 rounded up, seed 0).
DEFAULT_NUM_SHARDS = 4
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_SEED = 0


def _convert_digits(output_dir, *, image_dir, num_shards, test_fraction, seed):
  if image_dir is not None:
    raise DatasetError('--image_dir is only used by --dataset_name=image_folder; digits '
                       'comes with scikit-learn')
  # The digits split is fixed (digits.SPLIT_SEED, digits.SPLITS_TO_SIZES): a different seed
  # or fraction would silently produce data that get_split then rejects.
  if test_fraction != DEFAULT_TEST_FRACTION or seed != DEFAULT_SEED:
    raise DatasetError('digits has a fixed 1437/360 split; --test_fraction and --seed apply '
                       'to --dataset_name=image_folder only')
  return convert_digits.convert_digits(output_dir, num_shards)


def _convert_image_folder(output_dir, *, image_dir, num_shards, test_fraction, seed):
  return convert_image_folder.convert_image_folder(image_dir, output_dir, num_shards,
                                                   test_fraction, seed)


# Image dataset name -> (output_dir, *, image_dir, num_shards, test_fraction, seed) ->
# ConversionResult; each rejects the arguments it has no use for. Every registered image
# dataset has one (tests/datasets/test_convert_images_cli.py checks).
CONVERTERS = {digits.NAME: _convert_digits, image_folder.NAME: _convert_image_folder}


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
  num_shards: int = param(DEFAULT_NUM_SHARDS,
                          'Shards per split, at most (never more than the split has records).')
  # Split (image_folder only).
  test_fraction: float = param(DEFAULT_TEST_FRACTION,
                               'image_folder only: fraction of the images held out for testing.')
  seed: int = param(DEFAULT_SEED,
                    'image_folder only: seed of the train/test assignment.')


def convert_images(config):
  """Runs the conversion `config` (an ImageConversion) describes; see `convert`."""
  return convert(config.dataset_name, config.output_dir, image_dir=config.image_dir,
                 num_shards=config.num_shards, test_fraction=config.test_fraction,
                 seed=config.seed)


def convert(dataset_name, output_dir, image_dir=None,
            num_shards=DEFAULT_NUM_SHARDS,
            test_fraction=DEFAULT_TEST_FRACTION,
            seed=DEFAULT_SEED):
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
  if entry.kind != dataset_factory.IMAGE:
    raise DatasetError('%s is a video dataset; convert it with: python -m '
                       'datasets.convert_videos --dataset_name=%s ... --output_dir=%s '
                       '(convert_images handles %s)'
                       % (dataset_name, dataset_name, output_dir,
                          ', '.join(dataset_factory.list_datasets(dataset_factory.IMAGE))))
  if dataset_name not in CONVERTERS:
    raise ValueError('image dataset %r has no converter in CONVERTERS of %s'
                     % (dataset_name, __name__))
  return CONVERTERS[dataset_name](output_dir, image_dir=image_dir, num_shards=num_shards,
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
