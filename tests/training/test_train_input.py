"""training/train_input.py on a stand-in setup: a worker's share of the damaged videos it
may skip, and the one line that ends a run past --max_damaged_fraction. The input itself
is trained through in test_train.py, test_train_damaged_data.py, test_train_data_service.py."""

import types

from core.errors import DataError
from training import train_input


def _setup(num_samples=100, worker_replicas=2, fraction=0.1):
  config = types.SimpleNamespace(
      worker_replicas=worker_replicas, max_damaged_fraction=fraction, dataset_name='ucf101',
      dataset_split_name='train')
  dataset = types.SimpleNamespace(num_samples=num_samples, dataset_dir='/data/ucf101')
  return types.SimpleNamespace(config=config, dataset=dataset,
                               input=types.SimpleNamespace(skip_counter=lambda limit: limit))


def test_a_worker_may_skip_its_share_of_the_damaged_videos():
  assert train_input.skip_counter(_setup(100, 2, 0.1)) == 5    # 10 % of its 50 videos.
  assert train_input.skip_counter(_setup(100, 1, 0.0)) == 0


def test_too_many_damaged_videos_are_one_data_error_naming_a_video_and_the_verifier():
  skips = types.SimpleNamespace(
      damaged=lambda: {b'v_b': ('train-00001-of-00002', (3,), 40),
                       b'v_a': ('train-00000-of-00002', (7, 8), 50)},
      skipped_clips=4, limit=1)
  error = train_input.too_many_damaged(_setup(), skips)
  assert isinstance(error, DataError)
  message = str(error)
  assert message.startswith('2 videos of ucf101/train have frames that do not decode (4 clips '
                            'skipped), more than --max_damaged_fraction=0.1 allows (1 of '
                            'the 50 videos this worker reads)')
  assert "e.g. b'v_a' in train-00000-of-00002 (frame 7 of 50)" in message
  assert 'python -m datasets.verify_records --dataset_dir=/data/ucf101' in message
  assert '\n' not in message
