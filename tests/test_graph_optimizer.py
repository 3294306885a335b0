"""The tests' sessions without grappler (tests/graph_optimizer.py) against the product's own,
with it: the same runs, both ways, give the same numbers.

Each pair starts from one checkpoint and reads the same seeded batches
(tests/training/run_spy.py), so the runs differ only in grappler. Tolerance: each step's
total loss within 1e-4 relative, evaluation logits within 1e-4 absolute: grappler's
rewrites (constant folding, arithmetic simplification) may reorder float32 sums (LeNet's
three steps: no difference seen; I3D's first step: 1e-6). I3D is compared on its first
step only: training-mode batch norm over 2 clips whose last maps are 1x1x1 amplifies
differences of 1e-6 as the weights move (its second step's loss differed by 3 % here;
tests/training/test_train_xla.py saw the same with XLA); LeNet's steps check the updates.
That grappler ran in one run and not in the other is read from the nodes each first step
executed: those its constant folding made (`ConstantFolding/...`) only with it.
"""

import numpy as np
import pytest

from evaluation import run
from evaluation.config import EvalConfig
from tests import graph_optimizer
from tests import video_testdata as vt
from tests.training.run_spy import (seed_graph, seed_inputs, seeded_lenet_checkpoint,
                                    spy_on_training)
from tf_compat import tf
from training import train as train_module
from training.config import TrainConfig

pytestmark = pytest.mark.slow

STEPS = 3
LOSS_RTOL = 1e-4


def _with_grappler(monkeypatch, on):
  if on:
    monkeypatch.setenv(graph_optimizer.ENV, '1')
  else:
    monkeypatch.delenv(graph_optimizer.ENV, raising=False)


def _train_both_ways(monkeypatch, make_config):
  """{grappler on: (losses, nodes of grappler's the first step ran)}."""
  seed_inputs(monkeypatch)
  seed_graph(monkeypatch)
  runs = {}
  for on in (True, False):
    _with_grappler(monkeypatch, on)
    record = spy_on_training(monkeypatch)
    train_module.train(make_config(on))
    folded = {node.node_name for device in record.run_metadata.step_stats.dev_stats
              for node in device.node_stats if node.node_name.startswith('ConstantFolding/')}
    runs[on] = (record.losses, folded)
  return runs


def _train_config(train_dir, **values):
  values.setdefault('max_number_of_steps', STEPS)
  values.update(train_dir=str(train_dir), optimizer='sgd',
                learning_rate_decay_type='fixed', dropout_keep_prob=1.0, num_readers=1,
                num_preprocessing_threads=1, log_every_n_steps=STEPS, save_interval_secs=600,
                save_summaries_secs=600, clone_on_cpu=True, num_clones=2)
  return TrainConfig(**values)


def _assert_alike(runs, steps):
  (with_losses, with_folded), (without_losses, without_folded) = runs[True], runs[False]
  assert len(with_losses) == len(without_losses) == steps
  np.testing.assert_allclose(without_losses, with_losses, rtol=LOSS_RTOL)
  assert with_folded and not without_folded, (with_folded, without_folded)


def test_two_clone_lenet_trains_alike_with_and_without_grappler(digits_dir, tmp_path,
                                                                monkeypatch):
  checkpoint = seeded_lenet_checkpoint(str(tmp_path), seed=1)
  runs = _train_both_ways(monkeypatch, lambda on: _train_config(
      tmp_path / str(on), dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      checkpoint_path=checkpoint, batch_size=16, learning_rate=0.003))
  _assert_alike(runs, STEPS)


def test_two_clone_i3d_trains_and_evaluates_alike_with_and_without_grappler(
    tmp_path_factory, tmp_path, monkeypatch):
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  prefix = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')[0]
  runs = _train_both_ways(monkeypatch, lambda on: _train_config(
      tmp_path / str(on), dataset_name='video_folder', dataset_dir=rgb_dir, model_name='i3d',
      checkpoint_path=prefix, batch_size=2, clip_frames=4, train_image_size=vt.CROP,
      depth_multiplier=vt.DEPTH, learning_rate=0.001, max_number_of_steps=1))
  _assert_alike(runs, 1)
  logits = {}
  for on in (True, False):
    _with_grappler(monkeypatch, on)
    result, = run.evaluations(EvalConfig(
        dataset_name='video_folder', dataset_dir=rgb_dir, model_name='i3d',
        checkpoint_path=prefix, depth_multiplier=vt.DEPTH, eval_image_size=vt.CROP,
        eval_clips=2, clip_frames=4, batch_size=3, num_preprocessing_threads=2))
    logits[on] = result.result.primary.logits
  np.testing.assert_allclose(logits[False], logits[True], atol=1e-4)


def test_a_session_without_grappler_keeps_the_rest_of_its_config(monkeypatch):
  monkeypatch.delenv(graph_optimizer.ENV, raising=False)
  config = tf.ConfigProto(intra_op_parallelism_threads=1, allow_soft_placement=True)
  config.gpu_options.allow_growth = True
  expected = tf.ConfigProto()
  expected.CopyFrom(config)
  expected.graph_options.rewrite_options.disable_meta_optimizer = True
  assert graph_optimizer.without_grappler(config) == expected
  assert not config.HasField('graph_options')  # The caller's config is left as it was.
