"""--xla through the trainer: the same losses as without it, and a trace that shows the
clone's step ran as compiled XLA clusters, for LeNet on digits.

A narrow I3D: `make test` checks its stem and first Inception module
(tests/deployment/test_xla.py); the whole narrow I3D through the trainer is the `heavy`
test below, run by `make test-heavy` (XLA compiles its training step for minutes on 2
cores).

Both runs of a pair start from one checkpoint, read the same seeded batches and have no
dropout, so they differ only in compilation. LeNet's tolerance: each step's total loss
within 1e-4 relative of the uncompiled run's (XLA fuses and reorders float32 arithmetic;
the differences seen here are about 2e-7). Its checkpoint is seeded and its learning rate
small enough that the loss falls step by step: from an unseeded initialization at a
learning rate of 0.01 the loss doubled on the second step in some runs, and that jump
amplified the 1e-7 differences to 4e-4 by the fourth step, failing about one run in
three. The trace is read raw (tests/training/run_spy.py),
not through deployment.xla.
"""

import numpy as np
import pytest

from tests import video_testdata
from tests.training.run_spy import (executed_kernels, seed_inputs, seeded_lenet_checkpoint,
                                    spy_on_training)
from training import train as train_module
from training.config import TrainConfig

pytestmark = pytest.mark.slow

STEPS = 4
LOSS_RTOL = 1e-4


def _common(train_dir, **values):
  values.update(train_dir=str(train_dir), max_number_of_steps=STEPS, optimizer='sgd',
                learning_rate_decay_type='fixed', dropout_keep_prob=1.0, num_readers=1,
                num_preprocessing_threads=1, log_every_n_steps=STEPS,
                save_interval_secs=600)
  return TrainConfig(**values)


def _run_pair(monkeypatch, make_config):
  """(losses without XLA, losses with XLA, the XLA run's first-step RunMetadata)."""
  seed_inputs(monkeypatch)
  runs = []
  for xla in (False, True):
    record = spy_on_training(monkeypatch)
    train_module.train(make_config(xla))
    runs.append(record)
  return runs[0].losses, runs[1].losses, runs[1].run_metadata


def _assert_compiled(run_metadata, compute_kernel):
  kernels = [kernel for kernel, _ in executed_kernels(run_metadata)]
  assert kernels.count('_XlaCompile') >= 1 and kernels.count('_XlaRun') >= 1, kernels
  # The network's convolutions ran inside the clusters, not as kernels of their own.
  assert not [k for k in kernels if compute_kernel in k], kernels


def test_lenet_with_xla_trains_like_without(digits_dir, tmp_path, monkeypatch):
  checkpoint = seeded_lenet_checkpoint(str(tmp_path), seed=1)
  make_config = lambda xla: _common(
      tmp_path / ('xla' if xla else 'plain'), dataset_name='digits', dataset_dir=digits_dir,
      model_name='lenet', checkpoint_path=checkpoint, num_clones=1, clone_on_cpu=True,
      batch_size=32, learning_rate=0.003, xla=xla)
  plain, compiled, run_metadata = _run_pair(monkeypatch, make_config)
  assert len(plain) == len(compiled) == STEPS
  np.testing.assert_allclose(compiled, plain, rtol=LOSS_RTOL)
  assert plain[-1] < plain[0]  # It trained.
  _assert_compiled(run_metadata, 'Conv2D')


@pytest.mark.heavy
@pytest.mark.timeout(1800)
def test_the_whole_narrow_i3d_with_xla_trains_like_without(tmp_path_factory, tmp_path,
                                                          monkeypatch):
  """Tolerance: the first step's loss within 1e-4 relative, every step within 3e-2. XLA
  sums in another order, and training-mode batch norm over 4 clips whose last maps are
  2x1x1 amplifies that as the weights move (seen here: the first three steps within
  7e-5, the fourth 6e-3 apart; with 2 clips of 4 frames, whose last maps are 1x1x1, the
  runs parted after one step)."""
  rgb_dir = video_testdata.converted(tmp_path_factory, 'rgb')
  checkpoint, _, _ = video_testdata.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  make_config = lambda xla: _common(
      tmp_path / ('xla' if xla else 'plain'), dataset_name='video_folder',
      dataset_dir=rgb_dir, model_name='i3d', checkpoint_path=checkpoint, num_clones=1,
      batch_size=4, clip_frames=16, train_image_size=32, learning_rate=1e-4,
      depth_multiplier=video_testdata.DEPTH, xla=xla)
  plain, compiled, run_metadata = _run_pair(monkeypatch, make_config)
  assert len(plain) == len(compiled) == STEPS
  np.testing.assert_allclose(compiled[0], plain[0], rtol=1e-4)
  np.testing.assert_allclose(compiled, plain, rtol=3e-2)
  _assert_compiled(run_metadata, 'Conv3D')
