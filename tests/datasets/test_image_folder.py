"""Class-folder conversion: sizes, labels by folder, skipped files, decoded contents."""

import collections
import json
import os

import numpy as np
import pytest
from PIL import Image

from datasets import image_folder
from datasets.conversion import convert_images
from datasets.formats import image_records
from tf_compat import tf


def _tf_decode(serialized_records):
  """Decodes records with the training parser: [(image uint8 [H, W, 3], label)]."""
  with tf.Graph().as_default(), tf.Session() as sess:
    serialized = tf.placeholder(tf.string, [])
    image, label = image_records.parse_image_example(serialized, 3)
    return [sess.run([image, label], {serialized: record}) for record in serialized_records]


def _pil_rgb(path):
  with Image.open(path) as image:
    return np.asarray(image.convert('RGB'))


def test_conversion_sizes_labels_and_skipped_files(image_tree, tmp_path):
  image_dir, good, bad = image_tree
  output_dir = str(tmp_path / 'out')
  result = convert_images.convert('image_folder', output_dir, image_dir=image_dir,
                                  num_shards=2, test_fraction=0.2, seed=0)
  assert result.split_sizes == {'train': 8, 'test': 2}
  assert result.num_classes == 3 and result.empty_classes == ()
  assert sorted(path for path, _ in result.skipped) == sorted(bad)
  reasons = dict(result.skipped)
  assert 'corrupt image' in reasons[bad[0]]
  assert 'not an image' in reasons[bad[1]]
  assert 'not inside a class folder' in reasons[bad[2]]
  with open(os.path.join(output_dir, 'labels.txt')) as handle:
    assert handle.read() == '0:cat\n1:dog\n2:zebra\n'
  with open(os.path.join(output_dir, 'dataset_info.json')) as handle:
    assert json.load(handle) == {'dataset_name': 'image_folder', 'num_classes': 3,
                                 'num_channels': 3, 'splits': {'train': 8, 'test': 2},
                                 'conversion': {'image_dir': os.path.abspath(image_dir),
                                                'test_fraction': 0.2, 'seed': 0}}
  train = image_folder.get_split('train', output_dir)
  test = image_folder.get_split('test', output_dir)
  assert (train.num_samples, test.num_samples, train.num_channels) == (8, 2, 3)
  assert train.labels_to_names == {0: 'cat', 1: 'dog', 2: 'zebra'}
  assert sorted(os.listdir(output_dir)) == [
      'dataset_info.json', 'labels.txt', 'test-00000-of-00002', 'test-00001-of-00002',
      'train-00000-of-00002', 'train-00001-of-00002']


def test_records_decode_to_the_source_images(image_tree, tmp_path, helpers):
  image_dir, good, _ = image_tree
  output_dir = str(tmp_path / 'out')
  convert_images.convert('image_folder', output_dir, image_dir=image_dir, num_shards=3)
  examples = (helpers.read_examples(os.path.join(output_dir, 'train-*'))
              + helpers.read_examples(os.path.join(output_dir, 'test-*')))
  decoded = _tf_decode([example.SerializeToString() for example in examples])
  # Every source image has a distinct size, which identifies its record.
  by_size = {(height, width): (path, label) for path, (label, height, width) in good.items()}
  seen = collections.Counter()
  for example, (image, label) in zip(examples, decoded):
    height, width = (helpers.feature(example, 'image/height'),
                     helpers.feature(example, 'image/width'))
    path, expected_label = by_size[(height, width)]
    seen[path] += 1
    assert label == expected_label == helpers.feature(example, 'image/class/label')
    assert helpers.feature(example, 'image/channels') == 3
    assert image.shape == (height, width, 3)
    reference = _pil_rgb(path)
    difference = np.abs(image.astype(int) - reference.astype(int))
    if path.endswith('.png'):  # PNG bytes are kept: lossless, exact.
      assert helpers.feature(example, 'image/format') == b'png'
      assert difference.max() == 0
    else:  # JPEG kept, or BMP/GIF re-encoded as JPEG (quality 95).
      assert helpers.feature(example, 'image/format') == b'jpeg'
      assert difference.mean() < 2.0
  assert seen == collections.Counter(list(good))  # each image exactly once


def test_split_is_seeded_and_stratified(image_tree, tmp_path, helpers):
  image_dir, _, _ = image_tree

  def test_labels(seed, name):
    output_dir = str(tmp_path / name)
    convert_images.convert('image_folder', output_dir, image_dir=image_dir,
                           test_fraction=0.3, seed=seed)
    return sorted((helpers.feature(e, 'image/height'), helpers.feature(e, 'image/class/label'))
                  for e in helpers.read_examples(os.path.join(output_dir, 'test-*')))

  first, again = test_labels(0, 'a'), test_labels(0, 'b')
  assert first == again and len(first) == 3
  assert sorted(label for _, label in first) == [0, 1, 2]  # one per class (4/3/3 images)


def test_rerun_replaces_the_output(image_tree, tmp_path):
  image_dir, _, _ = image_tree
  output_dir = str(tmp_path / 'out')
  convert_images.convert('image_folder', output_dir, image_dir=image_dir, num_shards=4)
  convert_images.convert('image_folder', output_dir, image_dir=image_dir, num_shards=1)
  assert sorted(os.listdir(output_dir)) == ['dataset_info.json', 'labels.txt',
                                            'test-00000-of-00001', 'train-00000-of-00001']
  assert image_folder.get_split('train', output_dir).num_samples == 8


@pytest.mark.parametrize('setup, message', [
    ('missing', 'does not exist'),
    ('empty', 'has no class sub-directories'),
    ('empty_classes', 'holds no images: its class folders are empty'),
    ('no_images', 'holds no readable images: 1 files, none usable'),
    ('none', '--image_dir is required'),
])
def test_bad_trees_write_nothing(tmp_path, setup, message):
  image_dir = str(tmp_path / 'tree')
  if setup == 'empty':
    os.makedirs(image_dir)
  if setup in ('empty_classes', 'no_images'):
    os.makedirs(os.path.join(image_dir, 'only_class'))
  if setup == 'no_images':
    with open(os.path.join(image_dir, 'only_class', 'x.txt'), 'w') as handle:
      handle.write('text')
  output_dir = str(tmp_path / 'out')
  with pytest.raises(ValueError, match=message):
    convert_images.convert('image_folder', output_dir,
                           image_dir=None if setup == 'none' else image_dir)
  assert not os.path.exists(output_dir)


def test_bad_test_fraction(image_tree, tmp_path):
  with pytest.raises(ValueError, match='use a number >= 0 and < 1'):
    convert_images.convert('image_folder', str(tmp_path / 'out'), image_dir=image_tree[0],
                           test_fraction=1.0)


def test_interrupted_conversion_is_not_mistaken_for_data(image_tree, tmp_path, monkeypatch):
  image_dir, _, _ = image_tree
  output_dir = str(tmp_path / 'out')
  convert_images.convert('image_folder', output_dir, image_dir=image_dir)

  def fail(_):
    raise OSError('disk full')

  from datasets.conversion import convert_image_folder  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(convert_image_folder, '_encoded', fail)
  with pytest.raises(OSError, match='disk full'):
    convert_images.convert('image_folder', output_dir, image_dir=image_dir)
  # The old info file went first, so the half-replaced directory is reported, not read.
  with pytest.raises(ValueError, match='no conversion finished'):
    image_folder.get_split('train', output_dir)
  assert not [name for name in os.listdir(output_dir) if '.tmp-' in name]
