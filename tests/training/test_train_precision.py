"""--mixed_precision through the trainer: LeNet on digits in float16 and bfloat16 against
float32, checkpoints across precisions, an injected overflow, and the proof from the
first traced step that the compute ran in half precision.

Every run of the comparison starts from one float32 checkpoint (90 float32 steps of the
whole network from a seeded initialization), reads the same seeded batches (2 clones of
16) and has no dropout, so the runs differ only in precision; each trains 100 steps
(momentum, cosine from 0.02) of the fully connected layers, fc3 and fc4
(`--trainable_scopes`), on the convolutions' features computed in its precision.

Why not the convolutions' weights too: a CPU's float16 convolution gradients are the slow
kernels (`--mixed_precision=float16` warns of it): Eigen's on an AMD EPYC (16-21x
float32), oneDNN's on an Intel Xeon with AVX-512 FP16 (Sapphire Rapids: 280x, 52 s for one
weight gradient of this size), where this file's float16 runs took over 10 minutes. With
the convolutions frozen no convolution gradient runs at all, and what is left in float16
(the forward convolutions, the matmuls and their gradients, loss scaling) takes about
float32's time on both families. What float16 training checks, the loss scale, the skipped
overflows, float32 master weights and checkpoints, stays here; the convolutions' float16
gradients are run by tests/deployment/test_precision.py on one step of 4 digits.

Each CPU's summation order picks one of several trajectories that differ by rounding alone,
so neither the order of the three accuracies nor the warm checkpoint's distance from 95 %
is a property of the trainer. What the test holds to: the first 10 steps' total loss, step
by step, within 0.05 + 15 % of float32's for float16 (10-bit mantissa) and 0.1 + 25 % for
bfloat16 (7-bit); the mean of each 10 steps within the same tolerance over all 100; the loss
going down; and test accuracy of at least 95 % for all three, within 5 of the 360 test
digits of float32's.
"""

import os
import shutil

import numpy as np
import pytest

from core.params import ConfigError
from datasets import digits
from deployment import precision
from evaluation import image_eval
from evaluation.config import EvalConfig
from evaluation.setup import check_eval_config
from tests.training.run_spy import (executed_kernels, seed_inputs, seeded_lenet_checkpoint,
                                    spy_on_training)
from tf_compat import tf
from training import train as train_module
from training.config import TrainConfig
from training.input_position import is_input_position
from training.setup import check_train_config


def evaluate(config):
  """image_eval.evaluate of `config`, checked as eval.py checks it."""
  return image_eval.evaluate(check_eval_config(config))


pytestmark = pytest.mark.slow

PRECISIONS = ('float32', 'float16', 'bfloat16')
DT = {'float32': 1, 'float16': 19, 'bfloat16': 14}  # types.proto DataType enums
WARM_STEPS, STEPS, STEP_BY_STEP, WINDOW = 90, 100, 10, 10
# The comparison's runs write their summaries every 50 steps, not with every progress line
# (10): once or twice a run, in each precision, instead of 9 or 10 times (about 4 CPU-s of
# the module's 22; no test reads them).
SUMMARY_STEPS = 50
CURVE_TOLERANCE = {'float16': (0.05, 0.15), 'bfloat16': (0.1, 0.25)}  # (atol, rtol)
DIGITS_APART = 5  # test digits, of 360
# The layers the comparison trains: no convolution gradient runs (module doc).
FULLY_CONNECTED = ('LeNet/fc3', 'LeNet/fc4')


def _config(digits_dir, train_dir, **overrides):
  values = dict(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                train_dir=str(train_dir), num_clones=2, clone_on_cpu=True, batch_size=16,
                optimizer='momentum', dropout_keep_prob=1.0, num_readers=1,
                num_preprocessing_threads=1, log_every_n_steps=10,
                save_summaries_secs=600, save_interval_secs=600,
                trainable_scopes=FULLY_CONNECTED)
  values.update(overrides)
  return TrainConfig(**values)


def _accuracy(digits_dir, checkpoint, mixed_precision='float32'):
  """Test digits right: a count (a float32 ratio put exactly 342 of 360 below 0.95)."""
  metrics = evaluate(EvalConfig(dataset_name='digits', dataset_dir=digits_dir,
                                model_name='lenet', checkpoint_path=checkpoint,
                                num_preprocessing_threads=1,
                                mixed_precision=mixed_precision)).metrics
  assert metrics.num_examples == digits.SPLITS_TO_SIZES['test']
  return metrics.top1_correct


def _digits_apart(correct, other):
  """How many test digits two counts of right digits differ by."""
  return abs(correct - other)


def _reaches_95_percent(correct):
  return 100 * correct >= 95 * digits.SPLITS_TO_SIZES['test']


@pytest.fixture(scope='module')
def runs(digits_dir, tmp_path_factory):
  """{precision: Record with .checkpoint, .accuracy (test digits right), .losses}, each
  trained from one warm float32 checkpoint."""
  root = tmp_path_factory.mktemp('precision')
  with pytest.MonkeyPatch.context() as monkeypatch:
    seed_inputs(monkeypatch)
    warm = train_module.train(_config(
        digits_dir, root / 'warm', trainable_scopes=(),  # float32: every layer.
        max_number_of_steps=WARM_STEPS, save_summaries_steps=SUMMARY_STEPS,
        learning_rate=0.03, learning_rate_decay_type='cosine', warmup_epochs=0.5,
        end_learning_rate=1e-3,
        checkpoint_path=seeded_lenet_checkpoint(str(root), seed=3)))
    results = {}
    for mixed_precision in PRECISIONS:
      record = spy_on_training(monkeypatch)
      result = train_module.train(_config(
          digits_dir, root / mixed_precision, max_number_of_steps=STEPS,
          save_summaries_steps=SUMMARY_STEPS, learning_rate=0.02,
          learning_rate_decay_type='cosine', end_learning_rate=1e-4,
          checkpoint_path=warm.checkpoint, mixed_precision=mixed_precision))
      record.checkpoint = result.checkpoint
      record.accuracy = _accuracy(digits_dir, result.checkpoint)
      results[mixed_precision] = record
  return results


@pytest.mark.parametrize('mixed_precision', ['float16', 'bfloat16'])
def test_half_precision_tracks_the_float32_loss_curve(runs, mixed_precision):
  reference = np.array(runs['float32'].losses)
  losses = np.array(runs[mixed_precision].losses)
  assert len(losses) == len(reference) == STEPS
  atol, rtol = CURVE_TOLERANCE[mixed_precision]
  # Step by step while the runs share a trajectory; beyond, rounding differences have
  # grown into other ones (float16 out of this tolerance at step 27 on an AVX-512 CPU, 46
  # on an AVX2 one), whose 10-step means still agree.
  np.testing.assert_allclose(losses[:STEP_BY_STEP], reference[:STEP_BY_STEP], atol=atol,
                             rtol=rtol)
  windows = losses.reshape(-1, WINDOW).mean(axis=1)
  np.testing.assert_allclose(windows, reference.reshape(-1, WINDOW).mean(axis=1), atol=atol,
                             rtol=rtol)
  # It learned (from 90 warm steps the loss starts low).
  assert windows[-1] < windows[0]


def test_every_precision_reaches_the_same_test_accuracy(runs):
  for mixed_precision in PRECISIONS:
    assert _reaches_95_percent(runs[mixed_precision].accuracy), (
        mixed_precision, runs[mixed_precision].accuracy)
    assert _digits_apart(runs[mixed_precision].accuracy,
                         runs['float32'].accuracy) <= DIGITS_APART, (
                             mixed_precision, runs[mixed_precision].accuracy,
                             runs['float32'].accuracy)


@pytest.mark.parametrize('mixed_precision', ['float16', 'bfloat16'])
def test_the_first_step_ran_its_convolutions_and_matmuls_in_half_precision(
    runs, mixed_precision):
  kernels = executed_kernels(runs[mixed_precision].run_metadata)
  compute = [(kernel, dtype) for kernel, dtype in kernels
             if 'Conv2D' in kernel or 'MatMul' in kernel]
  # 2 clones x (conv1, conv2, fc3, fc4 forward, fc3's and fc4's weight gradients, fc4's
  # input gradient).
  assert len([1 for _, dtype in compute if dtype == DT[mixed_precision]]) >= 14, compute
  # No convolution gradient ran: the kernels slow on some CPUs (module doc).
  assert not [kernel for kernel, _ in kernels if 'Backprop' in kernel], kernels
  assert [k for k, dtype in compute if dtype == DT['float32']] == []
  reference = executed_kernels(runs['float32'].run_metadata)
  assert not [k for k, dtype in reference if dtype == DT[mixed_precision]]


def _variables(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: (tuple(shape), reader.get_variable_to_dtype_map()[name])
          for name, shape in reader.get_variable_to_shape_map().items()
          if not is_input_position(name)}


def test_checkpoints_hold_the_float32_names_and_dtypes(runs):
  reference = _variables(runs['float32'].checkpoint)
  assert 'LeNet/fc3/weights/Momentum' in reference
  for mixed_precision in ('float16', 'bfloat16'):
    assert _variables(runs[mixed_precision].checkpoint) == reference
  assert {dtype for _, dtype in reference.values()} == {tf.float32, tf.int64}


def test_a_float32_run_resumes_a_float16_run(runs, digits_dir, tmp_path):
  train_dir = tmp_path / 'resumed'
  shutil.copytree(os.path.dirname(runs['float16'].checkpoint), train_dir)
  result = train_module.train(_config(
      digits_dir, train_dir, max_number_of_steps=STEPS + 1, learning_rate=1e-9,
      learning_rate_decay_type='fixed'))
  assert result.global_step == STEPS + 1
  before = tf.train.load_checkpoint(runs['float16'].checkpoint)
  after = tf.train.load_checkpoint(result.checkpoint)
  np.testing.assert_allclose(after.get_tensor('LeNet/fc4/biases'),
                             before.get_tensor('LeNet/fc4/biases'), atol=1e-6)


def test_an_overflow_skips_the_update_halves_the_scale_and_is_counted(
    runs, digits_dir, tmp_path, caplog):
  """A float16 run resumes the float32 run with a loss scale of 2**64 (the largest
  --loss_scale takes): every scaled gradient overflows float16, so both steps are skipped:
  the weights and momentum stay the float32 checkpoint's, bit for bit; the scale halves
  twice; the log and TensorBoard count 2 skipped steps.

  The scale must overflow whatever batch comes: a gradient overflows once one of its
  float16 entries exceeds 65504 / scale. At 2**30 (6.1e-5) a batch that the CI machine's
  trajectory had learned (its loss printed 0.0000) went through; at 2**64 every entry
  would have to be below 3.6e-15, which needs every competing logit of all 16 digits more
  than 30 below the right one (scale x e**-30 / 16 is above 65504 at the logits)."""
  train_dir = tmp_path / 'overflow'
  shutil.copytree(os.path.dirname(runs['float32'].checkpoint), train_dir)
  caplog.set_level('INFO')
  result = train_module.train(_config(
      digits_dir, train_dir, max_number_of_steps=STEPS + 2, num_clones=1,
      mixed_precision='float16', loss_scale=2.0 ** 64, log_every_n_steps=1,
      learning_rate=0.01, learning_rate_decay_type='fixed'))
  assert result.global_step == STEPS + 2
  before = tf.train.load_checkpoint(runs['float32'].checkpoint)
  after = tf.train.load_checkpoint(result.checkpoint)
  for name in before.get_variable_to_shape_map():
    if name != 'global_step' and not is_input_position(name):
      np.testing.assert_array_equal(after.get_tensor(name), before.get_tensor(name), name)
  assert 'Loss scale at the end: %g; steps skipped for overflow: 2' % 2.0 ** 62 in caplog.text
  assert 'loss scale %g; skipped (overflow) 1' % 2.0 ** 63 in caplog.text
  scalars = {}
  for path in tf.io.gfile.glob(str(train_dir / 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag.startswith('loss_scale'):
          scalars[(value.tag, event.step)] = value.simple_value
  assert scalars[('loss_scale', STEPS + 2)] == 2.0 ** 62
  assert scalars[('loss_scale/skipped_steps', STEPS + 2)] == 2


def test_a_mixed_precision_checkpoint_evaluates_alike_in_float32_and_float16(runs,
                                                                            digits_dir):
  checkpoint = runs['float16'].checkpoint
  assert _digits_apart(_accuracy(digits_dir, checkpoint, 'float16'),
                       runs['float16'].accuracy) <= 2


def test_precision_flags_are_checked_before_any_graph(digits_dir, tmp_path):
  with pytest.raises(ConfigError, match='--mixed_precision=fp16 is not known; valid: '
                     'float32, float16, bfloat16'):
    check_train_config(_config(digits_dir, tmp_path, mixed_precision='fp16'))
  with pytest.raises(ConfigError, match=r'--loss_scale=0.5 must be in \[1, 2\*\*64\]'):
    check_train_config(_config(digits_dir, tmp_path, mixed_precision='float16',
                               loss_scale=0.5))
  with pytest.raises(ConfigError, match='--loss_scale_growth_steps=-1 must be >= 0'):
    check_train_config(_config(digits_dir, tmp_path, loss_scale_growth_steps=-1))


def test_float16_on_a_cpu_is_the_one_warning_of_the_trainer_and_of_eval(
    runs, digits_dir, tmp_path, monkeypatch, caplog):
  line = '--mixed_precision=float16 on a CPU: '
  caplog.set_level('WARNING')
  for check in (
      lambda: check_train_config(_config(digits_dir, tmp_path, mixed_precision='float16')),
      lambda: check_eval_config(EvalConfig(
          dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
          checkpoint_path=runs['float16'].checkpoint, mixed_precision='float16'))):
    monkeypatch.setattr(precision, '_WARNED', set())
    caplog.clear()
    check()
    assert caplog.text.count(line) == 1, caplog.text
  check_train_config(_config(digits_dir, tmp_path, mixed_precision='bfloat16'))
  assert caplog.text.count(line) == 1
