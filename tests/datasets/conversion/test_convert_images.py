"""The image converters are found by name beside the registry, which converts nothing."""

import pytest

from datasets import dataset_factory
from datasets.conversion import convert_images


def test_every_registered_image_dataset_has_a_converter():
  assert sorted(convert_images.CONVERTERS) == dataset_factory.list_datasets(
      dataset_factory.IMAGE)


def test_an_image_dataset_without_a_converter_is_named(monkeypatch):
  monkeypatch.delitem(convert_images.CONVERTERS, 'image_folder')
  with pytest.raises(ValueError, match="image dataset 'image_folder' has no converter in "
                                       'CONVERTERS of datasets.conversion.convert_images'):
    convert_images.convert('image_folder', '/nonexistent/out')
