"""Digits conversion against scikit-learn's own arrays (scaled here with NumPy)."""

import collections
import filecmp
import json
import os
import shutil

import numpy as np
import pytest
from sklearn.datasets import load_digits

from datasets.conversion import convert_images
from datasets import digits


def _reference():
  """[(label, uint8 8x8 image)] from scikit-learn: 0..16 -> round(x * 255 / 16), half up."""
  data = load_digits()
  images = np.floor(data.images * 255.0 / 16.0 + 0.5).astype(np.uint8)
  return [(int(label), image) for label, image in zip(data.target, images)]


def _decoded(digits_dir, split_name, helpers):
  split = digits.get_split(split_name, digits_dir)
  pairs = []
  for example in helpers.read_examples(split.file_pattern):
    assert helpers.feature(example, 'image/format') == b'png'
    assert [helpers.feature(example, 'image/' + key) for key in (
        'height', 'width', 'channels')] == [8, 8, 1]
    image = helpers.pil_decode(helpers.feature(example, 'image/encoded'), 'L')
    pairs.append((helpers.feature(example, 'image/class/label'), image))
  return pairs


def _key(pair):
  return pair[0], pair[1].tobytes()


def test_records_equal_scaled_sklearn_digits(digits_dir, helpers):
  train = _decoded(digits_dir, 'train', helpers)
  test = _decoded(digits_dir, 'test', helpers)
  assert (len(train), len(test)) == (1437, 360)
  assert len(train) + len(test) == 1797
  # Every record is one of sklearn's images with its label, each used exactly once.
  assert (collections.Counter(map(_key, train + test))
          == collections.Counter(map(_key, _reference())))
  # Stratified: each class is about 20% test.
  per_class = collections.Counter(label for label, _ in test)
  assert sorted(per_class) == list(range(10))
  assert all(34 <= count <= 37 for count in per_class.values())


def test_metadata_files(digits_dir):
  with open(os.path.join(digits_dir, 'labels.txt')) as handle:
    assert handle.read() == ''.join('%d:%d\n' % (i, i) for i in range(10))
  with open(os.path.join(digits_dir, 'dataset_info.json')) as handle:
    assert json.load(handle) == {'dataset_name': 'digits', 'num_classes': 10,
                                 'num_channels': 1, 'splits': {'train': 1437, 'test': 360}}
  assert digits.SPLITS_TO_SIZES == {'train': 1437, 'test': 360}


def test_get_split_describes_the_converted_data(digits_dir):
  split = digits.get_split('test', digits_dir)
  assert (split.name, split.split_name, split.dataset_dir) == ('digits', 'test', digits_dir)
  assert (split.num_samples, split.num_classes, split.num_channels) == (360, 10, 1)
  assert split.labels_to_names == {i: str(i) for i in range(10)}
  assert split.file_pattern == os.path.join(digits_dir, 'test-?????-of-00004')


def test_split_is_the_same_on_a_second_run(digits_dir, tmp_path):
  again = str(tmp_path / 'again')
  convert_images.convert('digits', again, num_shards=4)
  names = sorted(n for n in os.listdir(digits_dir))
  assert names == sorted(os.listdir(again))
  _, mismatch, errors = filecmp.cmpfiles(digits_dir, again, names, shallow=False)
  assert mismatch == [] and errors == []


def test_sizes_that_are_not_the_fixed_split_are_refused(digits_dir, tmp_path):
  copy = str(tmp_path / 'copy')
  shutil.copytree(digits_dir, copy)
  info_path = os.path.join(copy, 'dataset_info.json')
  with open(info_path) as handle:
    info = json.load(handle)
  info['splits'] = {'train': 1400, 'test': 397}
  with open(info_path, 'w') as handle:
    json.dump(info, handle)
  with pytest.raises(ValueError, match='expected 1437'):
    digits.get_split('train', copy)


def test_missing_shard_is_reported(digits_dir, tmp_path):
  copy = str(tmp_path / 'copy')
  shutil.copytree(digits_dir, copy)
  os.remove(os.path.join(copy, 'test-00002-of-00004'))
  with pytest.raises(ValueError, match='missing test-00002-of-00004'):
    digits.get_split('test', copy)
  digits.get_split('train', copy)  # the other split is still complete


def test_digits_refuses_image_folder_arguments(tmp_path):
  with pytest.raises(ValueError, match='fixed 1437/360 split'):
    convert_images.convert('digits', str(tmp_path / 'out'), seed=5)
  with pytest.raises(ValueError, match='only used by --dataset_name=image_folder'):
    convert_images.convert('digits', str(tmp_path / 'out'), image_dir=str(tmp_path))
  assert not os.path.exists(tmp_path / 'out')
