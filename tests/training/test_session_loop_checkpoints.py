"""Checkpoints and summaries of whole steps (training/session_loop.py,
training/checkpoint_saves.py, the summary fetch of training/progress.py), end to end.

  * The 2-clone I3D CPU recipe (configs/synthetic_i3d_rgb_scratch_2xcpu_16f.cfg, reduced
    to tests/video_testdata.py's tiny clips and a narrow I3D) trains to step 3 and is
    resumed twice, to 6 and to 12 (one resume starts before a summary step, one after):
    after each resume every earlier checkpoint file (data, index, meta) has the md5 it had
    when written and the `checkpoint` state file still lists the earlier entries, in
    order. The same run's loss curve, read as TensorBoard reads it, has a point every
    --save_summaries_steps: the recipe's 10 give 6 points in 60 steps; here 2 steps (a 5x
    shorter time scale, the run costs 3 I3D graph builds) give 6 points in 12, each the
    loss of the step it is stamped with (the summaries are of the batch trained), none
    dropped by a resume's start. The last resume ends with precise batch norm
    (--precise_bn_batches=2), which finds every batch norm of the I3D (fused, 5-D) in both
    clones before its one final save.
  * Replay: model.ckpt-3, written between steps by a seeded one-clone LeNet run (momentum:
    the slots are in the checkpoint too), restored in a directory of its own and trained
    on to step 6 matches the uninterrupted run's model.ckpt-6 to 1e-6. Each step's batch is
    the whole 16-example dataset of tests/global_batch.py, in one shard
    read through a shuffle buffer of one: every epoch comes in the same order, so a
    resumed input, which starts its epochs afresh, feeds the same batches in the same
    order (with the seeded shuffle of two shards the order inside the batch changed with
    the epoch, and the float32 sums with it: 3.8e-6 apart). The uninterrupted run fetches
    its summaries at every step and the resumed one none: the fetch does not change what
    is trained.
"""

import dataclasses
import hashlib
import os
import shutil

import numpy as np
import pytest

from core.params import config_from_argv
from datasets.inputs import image_input
from tests import video_testdata
from tests.global_batch import write_aligned_dataset
from tests.evaluation.tensorboard_events import read_eval_dir
from tests.training.lenet_runs import checkpoint_values
from tests.training.run_spy import (seed_inputs, seeded_lenet_checkpoint, spy_on_training,
                                    with_settings)
from tf_compat import tf
from training import precise_bn, train as train_module
from training.config import TrainConfig

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPE = os.path.join(ROOT, 'configs', 'synthetic_i3d_rgb_scratch_2xcpu_16f.cfg')
# A run and 2 resumes: the first resume's first step (4) writes a summary, the second's (7)
# does not. Each resume is a graph build (~8 CPU-s); a third showed nothing new.
SEGMENT_ENDS = (3, 6, 12)
SUMMARY_STEPS = 2
REPLAY_AT, REPLAY_END = 3, 6


def recipe_config(path=RECIPE):
  return config_from_argv(TrainConfig, ['--flagfile=' + path])[0]


def md5s(train_dir):
  """{checkpoint file name: md5} of every data, index and meta file."""
  found = {}
  for name in sorted(os.listdir(train_dir)):
    if name.startswith('model.ckpt-'):
      with open(os.path.join(train_dir, name), 'rb') as handle:
        found[name] = hashlib.md5(handle.read()).hexdigest()
  return found


def state_entries(train_dir):
  return [os.path.basename(path) for path in
          tf.train.get_checkpoint_state(train_dir).all_model_checkpoint_paths]


@pytest.fixture(scope='module')
def resumed_run(tmp_path_factory):
  """The reduced recipe run 0 -> 3, resumed to 6 and 12. -> (recipe, train_dir, [md5s
  after each run], [state entries after each], [(global step, loss)] of every step)."""
  recipe = recipe_config()
  train_dir = str(tmp_path_factory.mktemp('resumed') / 'train')
  reduced = dataclasses.replace(
      recipe, dataset_dir=video_testdata.converted(tmp_path_factory, 'rgb'),
      train_dir=train_dir, clip_frames=4, train_image_size=video_testdata.CROP,
      depth_multiplier=video_testdata.DEPTH, batch_size=2, num_preprocessing_threads=1,
      save_summaries_steps=SUMMARY_STEPS,
      # Saves by step only (none by time on a loaded machine): ckpt-2, then each end.
      save_interval_secs=0)
  checksums, entries, losses, start, precise = [], [], [], 0, []
  with pytest.MonkeyPatch.context() as monkeypatch:
    run = precise_bn.PreciseBatchNorm.run
    monkeypatch.setattr(precise_bn.PreciseBatchNorm, 'run',
                        lambda self, *args: (precise.append(self), run(self, *args))[1])
    for index, end in enumerate(SEGMENT_ENDS):
      record = spy_on_training(monkeypatch)
      result = train_module.train(dataclasses.replace(
          reduced, max_number_of_steps=end, save_interval_steps=2 if index == 0 else 0,
          precise_bn_batches=2 if end == SEGMENT_ENDS[-1] else 0))
      assert result.global_step == end
      losses += [(start + i + 1, loss) for i, loss in enumerate(record.losses)]
      checksums.append(md5s(train_dir))
      entries.append(state_entries(train_dir))
      start = end
  return recipe, train_dir, checksums, entries, losses, precise


def test_a_resume_never_rewrites_an_earlier_checkpoint(resumed_run):
  _, _, checksums, entries, _, _ = resumed_run
  names = ['model.ckpt-%d' % step for step in (2, 3, 6, 12)]
  assert entries == [names[:2], names[:3], names]
  for run, sums in enumerate(checksums):
    print('after run %d: %s' % (run, ', '.join(
        '%s %s' % (name.split('.')[1], digest[:8]) for name, digest in sums.items()
        if name.endswith('.data-00000-of-00001'))))
  for earlier, later in zip(checksums, checksums[1:]):
    assert len(later) == len(earlier) + 3   # one more checkpoint: data, index, meta
    assert {name: later[name] for name in earlier} == earlier


def test_the_recipe_draws_a_loss_curve_of_the_batches_trained(resumed_run):
  recipe, train_dir, _, _, losses, _ = resumed_run
  assert 60 // recipe.save_summaries_steps >= 6 and recipe.max_number_of_steps >= 60
  scalars, _ = read_eval_dir(train_dir)
  points = scalars['Losses/total_loss']
  print('loss curve: %d points of Losses/total_loss at steps %s' % (
      len(points), [step for step, _ in points]))
  assert [step for step, _ in points] == [2, 4, 6, 8, 10, 12]
  trained = dict(losses)
  assert sorted(trained) == list(range(1, 13))
  for step, value in points:
    # The step's own loss (float32 in the event, as fetched): not another batch's.
    assert value == pytest.approx(trained[step], rel=1e-6), step


def test_precise_bn_finds_every_batch_norm_of_the_two_i3d_clones(resumed_run):
  _, train_dir, _, _, _, precise = resumed_run
  assert len(precise) == 1 and precise[0].ran
  reader = tf.train.load_checkpoint(os.path.join(train_dir, 'model.ckpt-12'))
  moving_means = sorted(name[:-len('/moving_mean')] for name in
                        reader.get_variable_to_shape_map() if name.endswith('/moving_mean'))
  layers = precise[0].layers
  assert sorted(layer.name for layer in layers) == moving_means and len(layers) > 50
  assert all(layer.unbiased and len(layer.inputs) == 2 for layer in layers)
  assert {device for layer in layers for _, device in layer.inputs} == {
      '/device:CPU:0', '/device:CPU:1'}
  for layer in layers:
    assert reader.get_tensor(layer.name + '/moving_variance').min() > 0


def test_restoring_a_checkpoint_written_between_steps_replays_the_run(tmp_path,
                                                                      monkeypatch):
  data = write_aligned_dataset(tmp_path / 'data', 16, num_shards=1)
  seed_inputs(monkeypatch)
  monkeypatch.setattr(image_input, 'build_image_dataset', with_settings(
      image_input.build_image_dataset, shuffle_buffer_size=1))
  config = TrainConfig(
      dataset_name='image_folder', dataset_dir=data, model_name='lenet',
      train_dir=str(tmp_path / 'whole'), checkpoint_path=seeded_lenet_checkpoint(str(tmp_path), seed=5, channels=3),
      batch_size=16, optimizer='momentum', learning_rate=0.01,
      learning_rate_decay_type='fixed', dropout_keep_prob=1.0, num_readers=1,
      num_preprocessing_threads=1, log_every_n_steps=1, max_number_of_steps=REPLAY_END,
      save_interval_steps=REPLAY_AT, save_interval_secs=0, save_summaries_steps=1)
  whole = train_module.train(config)
  assert whole.checkpoint.endswith('model.ckpt-%d' % REPLAY_END)
  resumed_dir = tmp_path / 'resumed'
  os.makedirs(resumed_dir)
  middle = os.path.join(config.train_dir, 'model.ckpt-%d' % REPLAY_AT)
  for suffix in ('.data-00000-of-00001', '.index', '.meta'):
    shutil.copy(middle + suffix, str(resumed_dir))
  tf.train.update_checkpoint_state(str(resumed_dir), 'model.ckpt-%d' % REPLAY_AT)
  resumed = train_module.train(dataclasses.replace(
      config, train_dir=str(resumed_dir), save_interval_steps=0, save_summaries_steps=0,
      save_summaries_secs=0))
  assert resumed.local_steps == REPLAY_END - REPLAY_AT
  expected, got = checkpoint_values(whole.checkpoint), checkpoint_values(resumed.checkpoint)
  assert sorted(got) == sorted(expected)
  assert any(name.endswith('/Momentum') for name in got)
  before = checkpoint_values(middle)
  moved = max(float(np.max(np.abs(expected[n] - before[n]))) for n in expected)
  assert moved > 1e-3  # The last steps changed the weights; they are compared below.
  difference = max(float(np.max(np.abs(got[n] - expected[n]))) for n in expected)
  print('replay: max |difference| over every variable %.3g' % difference)
  assert difference <= 1e-6
