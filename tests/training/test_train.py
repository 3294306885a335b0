"""End-to-end training runs of `training.train.train` on converted digits (LeNet).

References are independent of the code under test: values read back from checkpoints
with tf.train.load_checkpoint, values read from the live session at the first step by a
spying step function, events read with tf.train.summary_iterator, NumPy arithmetic.
"""

import contextlib
import gc
import glob
import math
import os
import shutil

import numpy as np
import pytest

from deployment.session.session_config import make_session_config
from evaluation import image_eval
from evaluation.config import EvalConfig
from evaluation.setup import check_eval_config
from tf_compat import tf, slim
from checkpoints import restore
import training.train as train_module
from training.input_position import is_input_position
from training.optimization import OPTIMIZERS
from core.params import ConfigError
from training.setup import check_train_config
from tests.sessions import record_sessions
from tests.training.lenet_runs import (
    LENET_VARIABLES, checkpoint_values, event_tags, make_config, spy_on_first_step,
    train_with_timeout)
from tests.training.run_spy import seed_graph, seed_inputs, spy_on_training


def evaluate(config):
  """image_eval.evaluate of `config`, checked as eval.py checks it."""
  return image_eval.evaluate(check_eval_config(config))


pytestmark = pytest.mark.slow

FC4 = ('LeNet/fc4/weights', 'LeNet/fc4/biases')


@pytest.fixture
def spy(monkeypatch):
  """Installs FirstStepSpy as train()'s step fn; returns a getter of the last one."""
  return spy_on_first_step(monkeypatch)


@contextlib.contextmanager
def recorded_sessions():
  """tests/sessions.record_sessions for a module fixture: (graph, ConfigProto) of every tf
  Session created inside; yields the list."""
  with pytest.MonkeyPatch.context() as monkeypatch:
    yield record_sessions(monkeypatch)


@pytest.fixture(scope='module')
def source_run_and_sessions(digits_dir, tmp_path_factory):
  """2 clones on 2 logical CPUs, 20 sgd steps, GPU options set (they change nothing on
  CPUs; test_gpu_options_reach_the_training_session reads them from the sessions):
  (config, TrainResult, [(graph, session config)])."""
  train_dir = tmp_path_factory.mktemp('source') / 'train'
  config = make_config(digits_dir, train_dir, gpu_allow_growth=False,
                       gpu_memory_fraction=0.3)
  with recorded_sessions() as sessions:
    result = train_with_timeout(config)
  return config, result, sessions


@pytest.fixture(scope='module')
def source_run(source_run_and_sessions):
  """(config, TrainResult) of the 2-clone run."""
  return source_run_and_sessions[:2]


@pytest.fixture(scope='module')
def ten_steps_dir_and_sessions(digits_dir, tmp_path_factory):
  """A train_dir after 10 steps (1 clone, default session options), the sessions made."""
  train_dir = tmp_path_factory.mktemp('ten') / 'train'
  with recorded_sessions() as sessions:
    result = train_with_timeout(make_config(digits_dir, train_dir, num_clones=1,
                                            max_number_of_steps=10))
  assert result.global_step == 10
  return str(train_dir), sessions


@pytest.fixture(scope='module')
def ten_steps_dir(ten_steps_dir_and_sessions):
  """The 10-step train_dir; tests resume in copies of it."""
  return ten_steps_dir_and_sessions[0]


def copy_train_dir(source, tmp_path):
  target = str(tmp_path / 'resumed')
  shutil.copytree(source, target)
  return target


# ----------------------------------------------------------------------------- basics


def test_two_clones_train_to_the_last_step_and_save(source_run):
  config, result = source_run
  assert result.global_step == 20
  assert math.isfinite(result.loss)
  assert result.examples_per_sec is not None and result.examples_per_sec > 0
  expected = os.path.join(config.train_dir, 'model.ckpt-20')
  assert result.checkpoint == expected
  # The final save completed: index and data files exist, the checkpoint file points at
  # it, and the saved global step is 20.
  assert os.path.exists(expected + '.index')
  assert glob.glob(expected + '.data-*')
  assert tf.train.latest_checkpoint(config.train_dir) == expected
  assert tf.train.load_checkpoint(expected).get_tensor('global_step') == 20


def test_checkpoint_holds_one_copy_of_each_variable(source_run):
  """Clones share variables: no clone prefix, no per-clone copies (sgd has no slots)."""
  _, result = source_run
  names = set(tf.train.load_checkpoint(result.checkpoint).get_variable_to_shape_map())
  positions = {name for name in names if is_input_position(name)}
  assert len(positions) == 1  # The chief's input position (training.input_position).
  assert names - positions == set(LENET_VARIABLES) | {'global_step'}


def test_summaries_of_the_run(source_run):
  config, _ = source_run
  tags = event_tags(config.train_dir)
  for tag in ('clone_0/Losses/clone_loss', 'Losses/total_loss', 'learning_rate',
              'global_batch_size'):
    assert tag in tags, sorted(tags)
  assert all(value == pytest.approx(0.01) for _, value in tags['learning_rate'])
  # Global batch = 16 per clone x 2 clones.
  assert all(value == 32 for _, value in tags['global_batch_size'])
  assert all(math.isfinite(value) for _, value in tags['Losses/total_loss'])


def test_train_rejects_a_bad_config_before_writing(digits_dir, tmp_path):
  with pytest.raises(ConfigError):
    train_module.train(make_config(digits_dir, tmp_path / 'train', optimizer='nope'))
  assert not os.path.exists(str(tmp_path / 'train'))


# ----------------------------------------------------------------------------- sessions


def _training_session_config(recorded):
  configs = []
  for graph, config in recorded:
    if graph is None:
      continue
    if any(op.name.endswith('train_op') for op in graph.get_operations()):
      configs.append(config)
  assert configs, 'no session was created for the training graph'
  return configs


def test_gpu_options_reach_the_training_session(source_run_and_sessions):
  """The 2-clone run (20 steps, its step: test_two_clones_train_to_the_last_step_and_save)
  was given --nogpu_allow_growth --gpu_memory_fraction=0.3."""
  _, _, session_configs = source_run_and_sessions
  for session_config in _training_session_config(session_configs):
    assert session_config is not None
    assert session_config.gpu_options.allow_growth is False
    assert session_config.gpu_options.per_process_gpu_memory_fraction == pytest.approx(0.3)
    assert session_config.device_count['CPU'] == 2


def test_default_session_config_allows_growth(ten_steps_dir_and_sessions):
  """The 1-clone run of default session options (ten_steps_dir)."""
  _, session_configs = ten_steps_dir_and_sessions
  for session_config in _training_session_config(session_configs):
    assert session_config.gpu_options.allow_growth is True
    assert session_config.gpu_options.per_process_gpu_memory_fraction == 0.0
    assert session_config.device_count['CPU'] == 1


# ----------------------------------------------------------------------------- resume


def test_resume_continues_from_the_checkpoint_and_wins_over_checkpoint_path(
    digits_dir, source_run, ten_steps_dir, tmp_path, spy, monkeypatch):
  """A resume given --checkpoint_path too (once two trainings, one for each fact): the
  train_dir's checkpoint is restored, the fine-tuning plan never made."""
  source_config, source_result = source_run
  source = checkpoint_values(source_result.checkpoint)
  train_dir = copy_train_dir(ten_steps_dir, tmp_path)
  saved = checkpoint_values(os.path.join(train_dir, 'model.ckpt-10'))

  def no_plan(*args, **kwargs):
    raise AssertionError('plan_fine_tuning called although train_dir holds a checkpoint')
  monkeypatch.setattr(restore, 'plan_fine_tuning', no_plan)
  config = make_config(digits_dir, train_dir, num_clones=1, max_number_of_steps=20,
                       checkpoint_path=source_config.train_dir)
  result = train_with_timeout(config)
  step_fn = spy()
  # Started from step 10 with exactly the saved variables, then did 10 more steps.
  assert step_fn.start_step == 10
  for name in LENET_VARIABLES:
    np.testing.assert_array_equal(step_fn.start_values[name], saved[name], err_msg=name)
    assert not np.array_equal(step_fn.start_values[name], source[name])
  assert step_fn.calls == 10
  assert result.global_step == 20
  assert result.checkpoint == os.path.join(train_dir, 'model.ckpt-20')


def test_rerun_at_max_steps_trains_no_further_step(digits_dir, ten_steps_dir, tmp_path,
                                                   spy):
  """A finished run re-launched with the same max_number_of_steps must not train again
  (slim's loop calls the step fn once before asking whether to stop)."""
  train_dir = copy_train_dir(ten_steps_dir, tmp_path)
  saved = checkpoint_values(os.path.join(train_dir, 'model.ckpt-10'))
  config = make_config(digits_dir, train_dir, num_clones=1, max_number_of_steps=10)
  result = train_with_timeout(config)
  assert result.global_step == 10
  latest = tf.train.latest_checkpoint(train_dir)
  assert latest.endswith('model.ckpt-10') or all(
      np.array_equal(value, saved[name])
      for name, value in checkpoint_values(latest).items())
  # slim always calls the step fn once; that call must not run a training step.
  assert spy().local_steps == 0


# ----------------------------------------------------------------------------- fine-tune


def test_fine_tune_restores_all_but_excluded_and_trains_only_trainable(
    digits_dir, source_run, tmp_path, spy):
  """labels_offset=1: 9 classes, fc4 excluded from the restore and the only trained scope."""
  source_config, source_result = source_run
  source = checkpoint_values(source_result.checkpoint)
  config = make_config(digits_dir, tmp_path / 'fine', num_clones=1, max_number_of_steps=5,
                       labels_offset=1, checkpoint_path=source_config.train_dir,
                       checkpoint_exclude_scopes=('LeNet/fc4',),
                       trainable_scopes=('LeNet/fc4',))
  result = train_with_timeout(config)
  assert result.global_step == 5  # the global step is not restored from the source
  fine = checkpoint_values(result.checkpoint)
  assert fine['LeNet/fc4/weights'].shape == (1024, 9)
  for name in set(LENET_VARIABLES) - set(FC4):
    np.testing.assert_array_equal(fine[name], source[name], err_msg=name)
  step_fn = spy()
  for name in set(LENET_VARIABLES) - set(FC4):
    np.testing.assert_array_equal(step_fn.start_values[name], source[name], err_msg=name)
  # fc4 started from its own initialization and was trained.
  assert not np.array_equal(fine['LeNet/fc4/weights'], step_fn.start_values[
      'LeNet/fc4/weights'])
  assert not np.array_equal(fine['LeNet/fc4/biases'], step_fn.start_values[
      'LeNet/fc4/biases'])


def test_unexcluded_shape_mismatch_fails_before_training(digits_dir, source_run, tmp_path):
  source_config, _ = source_run
  train_dir = tmp_path / 'fine'
  config = make_config(digits_dir, train_dir, num_clones=1, max_number_of_steps=5,
                       labels_offset=1, checkpoint_path=source_config.train_dir)
  with pytest.raises(ConfigError) as error:
    train_module.train(config)
  assert 'LeNet/fc4/weights' in str(error.value)
  assert '--checkpoint_exclude_scopes' in str(error.value)
  assert not glob.glob(str(train_dir / 'model.ckpt*'))
  assert not os.path.exists(str(train_dir / 'checkpoint'))


# ----------------------------------------------------------------------------- options


def test_moving_average_shadows_in_checkpoint(digits_dir, tmp_path, spy):
  """One step with decay 0.9: the shadow starts at the initial weights w0 and, after the
  update to w1 at global step 1, is d*w0 + (1-d)*w1 with d = min(0.9, 2/11)."""
  config = make_config(digits_dir, tmp_path / 'train', num_clones=1, max_number_of_steps=1,
                       moving_average_decay=0.9)
  result = train_with_timeout(config)
  assert result.global_step == 1
  values = checkpoint_values(result.checkpoint)
  for name in LENET_VARIABLES:
    assert name + '/ExponentialMovingAverage' in values, sorted(values)
  assert 'global_step/ExponentialMovingAverage' not in values
  w0 = spy().start_values
  decay = min(0.9, (1.0 + 1) / (10.0 + 1))
  for name in LENET_VARIABLES:
    w1 = values[name]
    assert not np.array_equal(w1, w0[name]) or name.endswith('biases')
    np.testing.assert_allclose(values[name + '/ExponentialMovingAverage'],
                               decay * w0[name] + (1 - decay) * w1, rtol=1e-5, atol=1e-6,
                               err_msg=name)


def test_frozen_batch_norm_flag_keeps_batch_norm_and_trains_the_rest(digits_dir, tmp_path,
                                                                      spy):
  """--freeze_batch_norm=all with --num_micro_batches=2, as the 6 GB recipes train (the
  network-level contrast with unfrozen batch norm is tests/nets/test_batch_norm.py's)."""
  config = make_config(digits_dir, tmp_path / 'train', num_clones=1, max_number_of_steps=3,
                       use_batch_norm=True, freeze_batch_norm='all', num_micro_batches=2)
  result = train_with_timeout(config)
  assert result.global_step == 3
  values, start = checkpoint_values(result.checkpoint), spy().start_values
  frozen = [name for name in start if name.rsplit('/', 1)[-1] in
            ('moving_mean', 'moving_variance', 'beta')]
  assert len(frozen) == 9                  # conv1, conv2 and fc3 have batch norm.
  for name in frozen:
    np.testing.assert_array_equal(values[name], start[name], err_msg=name)
  for name in ('LeNet/conv1/weights', 'LeNet/fc3/weights', 'LeNet/fc4/weights'):
    assert not np.array_equal(values[name], start[name]), name


def test_clip_gradient_norm_bounds_the_update(digits_dir, tmp_path, spy):
  """sgd: one step moves the weights by exactly learning_rate x clipped gradient, whose
  global norm is clip_gradient_norm (the unclipped norm, summarized, is larger)."""
  learning_rate, clip = 0.05, 0.1
  config = make_config(digits_dir, tmp_path / 'train', num_clones=1, max_number_of_steps=1,
                       learning_rate=learning_rate, clip_gradient_norm=clip,
                       label_smoothing=0.1, save_summaries_steps=1)
  result = train_with_timeout(config)
  assert math.isfinite(result.loss)
  w0 = spy().start_values
  w1 = checkpoint_values(result.checkpoint)
  norm = math.sqrt(sum(float(np.sum((w1[n].astype(np.float64) - w0[n]) ** 2))
                       for n in LENET_VARIABLES))
  assert norm == pytest.approx(learning_rate * clip, rel=1e-3)
  # The summary holds the norm before clipping, of the step's own batch.
  unclipped = event_tags(config.train_dir)['gradient_global_norm']
  assert all(value > 2 * clip for _, value in unclipped), unclipped


@pytest.mark.parametrize('optimizer', sorted(OPTIMIZERS))
def test_every_optimizer_trains(digits_dir, tmp_path, optimizer):
  """Builds the graph (1 clone), runs 2 steps in a session: finite loss, step 2, moved."""
  config = make_config(digits_dir, tmp_path / 'train', num_clones=1, max_number_of_steps=2,
                       optimizer=optimizer, label_smoothing=0.1, clip_gradient_norm=5.0)
  setup = check_train_config(config)
  with tf.Graph().as_default():
    graph = train_module.build_training_graph(setup)
    init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    variables = slim.get_model_variables()
    with tf.Session(config=make_session_config(setup.deploy_config)) as sess:
      sess.run(init)
      before = sess.run(variables)
      losses = [sess.run(graph.train_op) for _ in range(2)]
      after = sess.run(variables)
      step = sess.run(graph.global_step)
  assert all(math.isfinite(loss) for loss in losses)
  assert step == 2
  assert any(not np.array_equal(b, a) for b, a in zip(before, after))


# ----------------------------------------------------------------------------- learning


def test_lenet_learns_digits(digits_dir, tmp_path, monkeypatch):
  train_dir = tmp_path / 'train'
  # 60 steps: the seeded run counts 350 of the 360 (40 steps: 340, 100: 352, 150 before).
  config = make_config(digits_dir, train_dir, max_number_of_steps=60, batch_size=32,
                       optimizer='momentum', momentum=0.9, learning_rate=0.02,
                       log_every_n_steps=20)
  # Seeded (initializers, dropout, input order): unseeded, 3 of 12 runs here fell short
  # (two at 20 and 49 % of the test digits) once the spy no longer slowed each step by a
  # heap walk; 0 of 5 with it.
  seed_graph(monkeypatch)
  seed_inputs(monkeypatch)
  record = spy_on_training(monkeypatch, count_frozen_every=20)
  result = train_with_timeout(config)
  assert result.global_step == 60
  # The steps ran with the built graph and TensorFlow's modules frozen out of the cyclic
  # collector (core.heap: hundreds of thousands of objects), from the first to the last,
  # released again at the end. (Counted at 4 steps: each count walks them all.)
  assert [step for step, _ in record.frozen_objects] == [1, 20, 40, 60]
  assert min(count for _, count in record.frozen_objects) > 100000
  assert gc.get_freeze_count() == 0
  # The graph is in the events for TensorBoard, once; no graph.pbtxt (training.supervisor).
  graphs = [event for path in glob.glob(str(train_dir / 'events.out.tfevents.*'))
            for event in tf.train.summary_iterator(path) if event.graph_def]
  assert len(graphs) == 1 and not (train_dir / 'graph.pbtxt').exists()
  metrics = evaluate(EvalConfig(dataset_name='digits', dataset_dir=digits_dir,
                                model_name='lenet', checkpoint_path=str(train_dir),
                                num_preprocessing_threads=1))
  assert metrics.num_examples == 360
  assert metrics.global_step == 60
  assert metrics.metrics.top1_correct >= 324  # 90 % of 360, counted
  assert metrics.metrics.top5_correct >= metrics.metrics.top1_correct
