"""The seeded stratified split: sizes, proportions, coverage, determinism."""

import collections

import numpy as np
import pytest

from datasets.splits.stratified_split import stratified_split


def test_covers_every_index_once_with_proportional_classes():
  labels = [0] * 50 + [1] * 30 + [2] * 20
  train, test = stratified_split(labels, 20, seed=3)
  assert sorted(np.concatenate([train, test]).tolist()) == list(range(100))
  assert len(test) == 20
  assert collections.Counter(labels[i] for i in test) == {0: 10, 1: 6, 2: 4}


def test_same_seed_same_split_other_seed_other_split():
  labels = np.arange(200) % 7
  first = stratified_split(labels, 40, seed=0)
  again = stratified_split(labels, 40, seed=0)
  other = stratified_split(labels, 40, seed=1)
  np.testing.assert_array_equal(first[1], again[1])
  np.testing.assert_array_equal(first[0], again[0])
  assert set(first[1].tolist()) != set(other[1].tolist())


def test_largest_remainder_hits_the_total_and_keeps_a_train_example():
  # Digits' class sizes: 0.2 per class rounds to 359, largest remainder reaches 360.
  counts = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
  labels = np.repeat(np.arange(10), counts)
  train, test = stratified_split(labels, 360, seed=0)
  assert (len(train), len(test)) == (1437, 360)
  # A class of one image never goes wholly to test.
  train, test = stratified_split([0, 0, 0, 1], 2, seed=0)
  assert 3 in train.tolist()


def test_bad_size_is_refused():
  with pytest.raises(ValueError):
    stratified_split([0, 1], 3, seed=0)
