"""Converts a class-folder tree of images into RGB image records with a seeded test split.

Two passes keep memory bounded by one image: the first opens every file to find the
readable images and their sizes, the second reads them again while the shards are written.
"""

import dataclasses
import io
import os

from PIL import Image

from datasets import image_folder
from datasets.conversion import shard_writer
from datasets.formats import converted_data, image_records
from datasets.formats.dataset_split import DatasetError
from datasets.splits.stratified_split import stratified_split

# (Pillow format, mode) pairs whose bytes TensorFlow decodes to RGB as they are. Other JPEG
# modes (CMYK, YCCK) and other formats (GIF, BMP, TIFF, WebP, ...) are re-encoded.
_KEPT_JPEG_MODES = ('L', 'RGB')
_REENCODE_QUALITY = 95


@dataclasses.dataclass(frozen=True)
class _ImageFile:
  path: str
  label: int
  height: int
  width: int
  keep_bytes: bool  # False: decode with Pillow, convert to RGB, re-encode as JPEG.
  image_format: bytes


def _class_names(image_dir):
  if not image_dir:
    raise DatasetError('--image_dir is required for --dataset_name=image_folder: a directory '
                       'with one sub-directory of images per class')
  if not os.path.isdir(image_dir):
    raise DatasetError('--image_dir=%s does not exist or is not a directory' % image_dir)
  names = sorted(name for name in os.listdir(image_dir)
                 if not name.startswith('.') and os.path.isdir(os.path.join(image_dir, name)))
  if not names:
    raise DatasetError('--image_dir=%s has no class sub-directories; expected '
                       '%s/<class>/<image>' % (image_dir, image_dir.rstrip('/')))
  return names


def _inspect(path, label):
  """Returns an _ImageFile, or raises ValueError with the reason the file is unusable."""
  try:
    # verify() checks what load() does not (e.g. PNG chunk checksums, which TensorFlow's
    # decoder enforces); the file must be reopened after it.
    with Image.open(path) as image:
      image.verify()
    with Image.open(path) as image:
      image.load()
      image_format, mode, (width, height) = image.format, image.mode, image.size
  except Image.UnidentifiedImageError:
    raise ValueError('not an image Pillow can read') from None
  except Exception as error:  # pylint: disable=broad-except
    # Decoders of untrusted files fail in many ways (OSError, SyntaxError, EOFError, ...);
    # every one means "not a usable image", and the reason is reported, not swallowed.
    raise ValueError('corrupt image (%s: %s)' % (type(error).__name__, error)) from None
  keep = image_format == 'PNG' or (image_format == 'JPEG' and mode in _KEPT_JPEG_MODES)
  stored_format = b'png' if image_format == 'PNG' else b'jpeg'
  return _ImageFile(path, label, height, width, keep, stored_format)


def _scan(image_dir, class_names):
  """First pass: returns ([_ImageFile], [(path, reason)]) in class, then file name order."""
  images, skipped = [], []
  for name in sorted(os.listdir(image_dir)):
    path = os.path.join(image_dir, name)
    if not name.startswith('.') and not os.path.isdir(path):
      skipped.append((path, 'not inside a class folder'))
  for label, class_name in enumerate(class_names):
    class_dir = os.path.join(image_dir, class_name)
    for name in sorted(os.listdir(class_dir)):
      path = os.path.join(class_dir, name)
      if name.startswith('.'):
        continue  # .DS_Store and friends: never images, not worth a report line.
      if os.path.isdir(path):
        skipped.append((path, 'a directory; images must sit directly in a class folder'))
        continue
      try:
        images.append(_inspect(path, label))
      except ValueError as reason:
        skipped.append((path, str(reason)))
  return images, skipped


def _encoded(image_file):
  """Second pass: the bytes to store for one image."""
  if image_file.keep_bytes:
    with open(image_file.path, 'rb') as handle:
      return handle.read()
  with Image.open(image_file.path) as image:
    buffer = io.BytesIO()
    image.convert('RGB').save(buffer, format='JPEG', quality=_REENCODE_QUALITY)
    return buffer.getvalue()


def _records(images, indices):
  for index in indices:
    image_file = images[index]
    example = image_records.image_to_example(
        _encoded(image_file), image_file.image_format, image_file.label, image_file.height,
        image_file.width, image_folder.NUM_CHANNELS)
    yield example.SerializeToString(deterministic=True)


def convert_image_folder(image_dir, output_dir, num_shards, test_fraction, seed):
  """Converts `<image_dir>/<class>/<image>` into train/test shards in `output_dir`.

  Classes are the sorted sub-directory names. round(n * test_fraction) of the n readable
  images go to the test split, spread over classes in proportion to their sizes (largest
  remainder; a class keeps at least one training image) and chosen by a seeded permutation.
  Unreadable files are skipped and returned in the result. Nothing is written if there is
  no readable image.

  Returns:
    A ConversionResult.

  Raises:
    DatasetError: missing or empty tree, no readable image, or a bad test_fraction.
  """
  if not 0 <= test_fraction < 1:
    raise DatasetError('--test_fraction=%r is not accepted: use a number >= 0 and < 1'
                       % (test_fraction,))
  class_names = _class_names(image_dir)
  images, skipped = _scan(image_dir, class_names)
  if not images and not skipped:
    raise DatasetError('--image_dir=%s holds no images: its class folders are empty'
                       % image_dir)
  if not images:
    example = ' (e.g. %s: %s)' % skipped[0] if skipped else ''
    raise DatasetError('--image_dir=%s holds no readable images: %d files, none usable%s'
                       % (image_dir, len(skipped), example))
  labels = [image_file.label for image_file in images]
  train, test = stratified_split(labels, int(len(images) * test_fraction + 0.5), seed)
  splits = {'train': (_records(images, train), len(train)),
            'test': (_records(images, test), len(test))}
  # Recorded so that a damaged shard's error can give the command that converts it again.
  conversion = {'image_dir': os.path.abspath(image_dir), 'test_fraction': test_fraction,
                'seed': seed}
  shard_writer.write_converted_dataset(output_dir, image_folder.NAME, class_names,
                                         image_folder.NUM_CHANNELS, splits, num_shards,
                                         extra={'conversion': conversion})
  present = set(labels)
  return converted_data.ConversionResult(
      dataset_name=image_folder.NAME, output_dir=output_dir,
      split_sizes={'train': len(train), 'test': len(test)}, num_classes=len(class_names),
      skipped=tuple(skipped),
      empty_classes=tuple(name for label, name in enumerate(class_names)
                          if label not in present))
