"""Converts scikit-learn's digits into PNG image records with the fixed train/test split."""

import io

import numpy as np
from PIL import Image

from datasets import digits
from datasets.conversion import shard_writer
from datasets.formats import converted_data, image_records
from datasets.formats.dataset_split import DatasetError
from datasets.splits.stratified_split import stratified_split


def to_uint8(images):
  """Maps sklearn's 0..16 pixel values to 0..255, rounding half up: float [N, 8, 8] -> uint8."""
  values = np.asarray(images).astype(np.int64)
  return ((values * 255 + 8) // 16).astype(np.uint8)


def _encode_png(image):
  """uint8 [H, W] -> grey PNG bytes."""
  buffer = io.BytesIO()
  Image.fromarray(image).save(buffer, format='PNG')
  return buffer.getvalue()


def _records(images, labels, indices):
  height, width = images.shape[1:3]
  for index in indices:
    example = image_records.image_to_example(
        _encode_png(images[index]), b'png', int(labels[index]), height, width,
        digits.NUM_CHANNELS)
    yield example.SerializeToString(deterministic=True)


def _load_digits():
  """Returns (images uint8 [1797, 8, 8], labels int64 [1797])."""
  # Imported here: only this converter needs scikit-learn, training does not.
  from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  data = load_digits()
  expected = sum(digits.SPLITS_TO_SIZES.values())
  if len(data.target) != expected or data.images.shape[1:] != (8, 8):
    raise DatasetError('scikit-learn returned %d digits of shape %s, expected %d of (8, 8)'
                       % (len(data.target), data.images.shape[1:], expected))
  return to_uint8(data.images), data.target.astype(np.int64)


def convert_digits(output_dir, num_shards):
  """Writes digits train/test shards, labels.txt and dataset_info.json to `output_dir`.

  Returns:
    A ConversionResult.
  """
  images, labels = _load_digits()
  train, test = stratified_split(labels, digits.SPLITS_TO_SIZES['test'], digits.SPLIT_SEED)
  splits = {'train': (_records(images, labels, train), len(train)),
            'test': (_records(images, labels, test), len(test))}
  shard_writer.write_converted_dataset(output_dir, digits.NAME, list(digits.CLASS_NAMES),
                                         digits.NUM_CHANNELS, splits, num_shards)
  return converted_data.ConversionResult(
      dataset_name=digits.NAME, output_dir=output_dir,
      split_sizes={'train': len(train), 'test': len(test)}, num_classes=digits.NUM_CLASSES)
