"""The clip records of tests/datasets/inputs/clip_records.py as fixtures, written once per
worker and read by the training side (test_clip_input) and the evaluation side
(test_clip_input_eval): `rgb` (3 shards, chunks of 3 frames) and `flow` (2 shards, chunks
of 2 frames), each (DatasetSplit, stored videos)."""

import pytest

from tests.datasets.inputs.clip_records import flow_split, rgb_split


@pytest.fixture(scope='session')
def rgb(tmp_path_factory):
  return rgb_split(tmp_path_factory)


@pytest.fixture(scope='session')
def flow(tmp_path_factory):
  return flow_split(tmp_path_factory)
