"""evaluation.loop.scored: what images and videos share once the batches have run (the
loop itself runs in test_image_eval.py and test_video_eval.py on real checkpoints)."""

import types

import numpy as np
import pytest

from core.errors import DataError
from datasets.inputs.input_factory import IMAGE, VIDEO
from evaluation import loop


def _setup(kind, listed, max_num_batches=None):
  stream = types.SimpleNamespace(
      name='rgb', data_flag='dataset_dir=/data/x',
      split=types.SimpleNamespace(num_samples=listed, dataset_dir='/data/x'))
  setup = types.SimpleNamespace(kind=kind, config=types.SimpleNamespace(
      max_num_batches=max_num_batches))
  return setup, stream


def _arrays(damage):
  count = len(damage)
  return [np.arange(count * 2, dtype=np.float32).reshape(count, 2),
          np.arange(count, dtype=np.int32), np.array([b'v%d' % i for i in range(count)]),
          np.array(damage)]


@pytest.mark.parametrize('kind', [IMAGE, VIDEO])
def test_damaged_examples_are_left_out_and_named(kind):
  setup, stream = _setup(kind, listed=5)
  logits, labels, ids, unscored, not_read = loop.scored(
      setup, stream, _arrays([b'', b'frame 1 does not decode', b'', b'']))
  assert ids.tolist() == ['v0', 'v2', 'v3'] and labels.dtype == np.int64
  assert labels.tolist() == [0, 2, 3] and logits.shape == (3, 2)
  assert unscored == (('v1', 'frame 1 does not decode'),) and not_read == 1


def test_fewer_batches_on_purpose_are_not_counted_as_unread():
  setup, stream = _setup(VIDEO, listed=5, max_num_batches=1)
  assert loop.scored(setup, stream, _arrays([b'', b'']))[4] == 0


@pytest.mark.parametrize('kind, unit', [(IMAGE, 'images'), (VIDEO, 'videos')])
def test_nothing_scored_is_one_data_error(kind, unit):
  setup, stream = _setup(kind, listed=1)
  with pytest.raises(DataError, match='--dataset_dir=/data/x: none of the 1 %s read could '
                     'be scored, e.g. v0: bad' % unit):
    loop.scored(setup, stream, _arrays([b'bad']))
