"""`evaluation.image_eval.evaluate` against accuracies computed here.

The reference (tests/evaluation/image_reference.py): the test records decoded with Pillow,
preprocessed in NumPy as the 'lenet' preprocessing specifies, run through a LeNet built in
a graph of its own loaded with the checkpoint's values; accuracy and recall@5 in NumPy.
"""

import dataclasses
import json
import logging
import os
import re

import numpy as np
import pytest
from PIL import Image

from evaluation import run
from evaluation import image_eval
from evaluation.config import EvalConfig
from evaluation.setup import check_eval_config
from tf_compat import tf
from training.config import TrainConfig
from core import errors
from core.params import ConfigError
from training.train import train
from tests.evaluation import tensorboard_events as tbe
from tests.evaluation.placeholder_checkpoint import placeholder_checkpoint
from tests import trained_runs
from tests.evaluation.image_reference import (
    NUM_TEST, accuracy_and_recall5, checkpoint_values, ema_values,
    read_split, reference_logits)
from tests.training.lenet_runs import LENET_VARIABLES
from tests.video_testdata import write_checkpoint
from tests.sessions import assert_gpu_options, record_sessions
from tests.training.run_spy import seed_graph, seed_inputs


def evaluate(config):
  """image_eval.evaluate of `config`, checked as eval.py checks it."""
  return image_eval.evaluate(check_eval_config(config))


# ----------------------------------------------------------------------------- fixtures


# digits_dir: tests/conftest.py's, the digits converted once per test run.


@pytest.fixture(scope='module')
def raw_test_split(digits_dir):
  return read_split(digits_dir)


@pytest.fixture(scope='module')
def test_split(raw_test_split):
  images, labels, _ = raw_test_split
  assert images.shape == (NUM_TEST, 28, 28, 1)
  return images, labels


def _train(digits_dir, train_dir, **overrides):
  """A seeded LeNet run (its initial weights and its input order the same every run: an
  unseeded 40-step run once stayed at chance, 0.1, and the tests compare its weights'
  accuracy with noise's)."""
  values = dict(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      train_dir=str(train_dir), num_clones=2, clone_on_cpu=True, max_number_of_steps=40,
      optimizer='momentum', momentum=0.9, learning_rate=0.02,
      learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
      batch_size=32, log_every_n_steps=10, save_summaries_secs=600,
      save_interval_secs=600)
  values.update(overrides)
  with pytest.MonkeyPatch.context() as monkeypatch:
    seed_graph(monkeypatch)
    seed_inputs(monkeypatch)
    return train(TrainConfig(**values))


@pytest.fixture(scope='module')
def two_clone_checkpoint(digits_dir, tmp_path_factory):
  """A LeNet trained 40 steps with 2 clones on 2 logical CPUs: its checkpoint prefix."""
  result = _train(digits_dir, tmp_path_factory.mktemp('two_clones') / 'train')
  assert result.global_step == 40
  return result.checkpoint


@pytest.fixture(scope='module')
def two_clone_reference(test_split, two_clone_checkpoint):
  """The reference's logits [360, 10] of the two-clone checkpoint's weights (an example's
  logits do not depend on the others: tests of the first k examples take the first k)."""
  return reference_logits(checkpoint_values(two_clone_checkpoint), test_split[0])


@pytest.fixture(scope='module')
def two_clone_evaluated(digits_dir, two_clone_checkpoint):
  """-> (result, [(graph, ConfigProto)] of its sessions): the two-clone run evaluated once
  for several tests, given its training directory and GPU options (no growth, 0.2)."""
  with pytest.MonkeyPatch.context() as monkeypatch:
    sessions = record_sessions(monkeypatch)
    result = evaluate(eval_config(digits_dir, os.path.dirname(two_clone_checkpoint),
                                  gpu_allow_growth=False, gpu_memory_fraction=0.2))
  return result, sessions


@pytest.fixture(scope='module')
def ema_checkpoint(digits_dir, tmp_path_factory):
  result = _train(digits_dir, tmp_path_factory.mktemp('ema') / 'train',
                  max_number_of_steps=30, moving_average_decay=0.9)
  return result.checkpoint


def eval_config(digits_dir, checkpoint_path, **overrides):
  values = dict(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                checkpoint_path=checkpoint_path, num_preprocessing_threads=1)
  values.update(overrides)
  return EvalConfig(**values)


# ----------------------------------------------------------------------------- tests


def test_reference_reads_sklearn_digits(raw_test_split):
  """The reference inputs are real digits: each decoded test image is an sklearn digit of
  the same label, 0..16 scaled to 0..255 (rounded), and the test split is stratified."""
  from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  data = load_digits()
  scaled = np.floor(data.images * 255.0 / 16.0 + 0.5).astype(np.uint8)
  known = {(int(label), image.tobytes()) for label, image in zip(data.target, scaled)}
  _, labels, raw = raw_test_split
  assert raw.shape == (NUM_TEST, 8, 8)
  assert all((int(label), image.tobytes()) in known for label, image in zip(labels, raw))
  assert len({image.tobytes() for image in raw}) > 350  # distinct examples, not repeats
  counts = np.bincount(labels, minlength=10)
  assert counts.sum() == NUM_TEST and counts.min() >= 35 and counts.max() <= 37


def test_reference_preprocessing_is_tf_bilinear_resize(raw_test_split):
  """The NumPy resize agrees with TF 2's tf.image.resize (bilinear, half-pixel)."""
  images, _, raw = raw_test_split
  with tf.Graph().as_default(), tf.Session() as sess:
    resized = sess.run(tf.compat.v2.image.resize(
        raw[:20, :, :, None].astype(np.float32), [28, 28], method='bilinear'))
  np.testing.assert_allclose(images[:20], (resized - 128.0) / 128.0, atol=1e-5)


@pytest.mark.slow
def test_evaluates_every_test_example_once(digits_dir, test_split, two_clone_checkpoint,
                                           two_clone_reference, two_clone_evaluated):
  _, labels = test_split
  expected = accuracy_and_recall5(two_clone_reference, labels)
  result, _ = two_clone_evaluated
  assert result.num_examples == NUM_TEST
  assert result.global_step == 40
  assert result.checkpoint == two_clone_checkpoint
  assert result.accuracy == pytest.approx(expected[0], abs=1e-6)
  assert result.recall_at_5 == pytest.approx(expected[1], abs=1e-6)
  # A batch size that does not divide 360: the last partial batch is evaluated too.
  odd = evaluate(eval_config(digits_dir, two_clone_checkpoint, batch_size=7))
  assert odd.num_examples == NUM_TEST
  assert odd.accuracy == pytest.approx(expected[0], abs=1e-6)
  assert odd.recall_at_5 == pytest.approx(expected[1], abs=1e-6)


@pytest.mark.slow
def test_checkpoint_directory_gives_its_latest_checkpoint(two_clone_checkpoint,
                                                          two_clone_evaluated):
  """two_clone_evaluated evaluated the run's directory."""
  result, _ = two_clone_evaluated
  assert result.checkpoint == two_clone_checkpoint
  assert result.global_step == 40


@pytest.mark.slow
def test_clone_count_does_not_matter(digits_dir, tmp_path, two_clone_checkpoint,
                                     two_clone_evaluated):
  """Variables carry no clone prefix: the same values saved from a plain one-device graph
  evaluate to the same numbers."""
  values = checkpoint_values(two_clone_checkpoint)
  assert not [name for name in values if 'clone' in name]
  assert set(LENET_VARIABLES) <= set(values)
  plain = write_checkpoint(str(tmp_path / 'plain.ckpt'),
                           {name: values[name] for name in LENET_VARIABLES + ('global_step',)})
  first, _ = two_clone_evaluated
  second = evaluate(eval_config(digits_dir, plain))
  assert (second.accuracy, second.recall_at_5, second.num_examples, second.global_step) == (
      first.accuracy, first.recall_at_5, first.num_examples, first.global_step)


@pytest.mark.slow
def test_eval_dir_summaries_report_and_confusion_png(digits_dir, test_split, tmp_path,
                                                     two_clone_checkpoint,
                                                     two_clone_reference, caplog):
  """eval_dir read back with TensorBoard's reader: slim's two scalars, and top-1, top-5,
  mean class and per-class accuracy and the confusion matrix, against NumPy on the
  reference logits; the same figures in the JSON report; the PNG beside them."""
  _, labels = test_split
  expected = tbe.numpy_figures(two_clone_reference, labels, 10)
  eval_dir = str(tmp_path / 'eval')
  caplog.set_level(logging.INFO, logger='absl')
  [outcome] = list(run.evaluations(eval_config(digits_dir, two_clone_checkpoint,
                                               eval_dir=eval_dir, batch_size=50)))
  result = outcome.result
  scalars, pictures = tbe.read_eval_dir(eval_dir)
  assert scalars['eval/Accuracy'] == [(40, pytest.approx(result.accuracy))]
  assert scalars['eval/Recall_5'] == [(40, pytest.approx(result.recall_at_5))]
  assert result.accuracy == pytest.approx(expected['top1'], abs=1e-6)
  image = tbe.assert_stream_events(scalars, pictures, 'image', 40, expected,
                                   [str(d) for d in range(10)])
  assert len([tag for tag in scalars if tag.startswith('per_class_accuracy/image/')]) == 10
  assert outcome.confusion_paths == (os.path.join(eval_dir, 'confusion-40-image.png'),)
  with Image.open(outcome.confusion_paths[0]) as saved:
    assert saved.size == image.size

  assert outcome.report_path == os.path.join(eval_dir, 'report-40.json')
  with open(outcome.report_path) as handle:
    report = json.load(handle)
  stream = report['streams']['image']
  assert report['primary'] == 'image' and report['global_step'] == 40
  assert report['preprocessing'] == {'name': 'lenet', 'image_size': 28}
  assert stream['confusion_matrix'] == expected['confusion'].tolist()
  assert stream['metrics']['num_images'] == NUM_TEST
  assert stream['metrics']['top5'] == pytest.approx(expected['top5'], abs=1e-9)
  assert [c['accuracy'] for c in stream['per_class']] == pytest.approx(
      expected['per_class'].tolist())
  assert [c['images'] for c in stream['per_class']] == np.bincount(labels).tolist()

  text = run.summary(outcome)
  assert text.splitlines()[0] == (
      'Accuracy: %.4f (%d/360)  Recall@5: %.4f (%d/360)  (360 examples, step 40)' % (
          expected['top1'], expected['top1_correct'], expected['top5'],
          expected['top5_correct']))
  assert (stream['metrics']['top1_correct'], stream['metrics']['top5_correct']) == (
      expected['top1_correct'], expected['top5_correct'])
  assert scalars['eval/image/examples'] == [(40, NUM_TEST)]
  # The progress lines only: an alert on the predictions also begins with the stream's name.
  lines = [r.getMessage() for r in caplog.records
           if re.match(r'image: \d+/360 images \(', r.getMessage())]
  assert lines[-1].startswith('image: 360/360 images (100.0%), ')   # 8 batches: every one
  assert [line.split(' (')[0] for line in lines[:2]] == ['image: 50/360 images',
                                                         'image: 100/360 images']


@pytest.mark.slow
def test_gpu_options_reach_the_evaluation_session(two_clone_evaluated):
  """The shared evaluation was given no growth and a 0.2 cap: every session has them."""
  _, sessions = two_clone_evaluated
  assert_gpu_options(sessions, False, 0.2)


@pytest.mark.slow
def test_moving_average_weights_are_evaluated(digits_dir, test_split, ema_checkpoint):
  images, labels = test_split
  values = checkpoint_values(ema_checkpoint)
  averaged = ema_values(values)
  assert sorted(averaged) == sorted(LENET_VARIABLES)
  expected = accuracy_and_recall5(reference_logits(averaged, images), labels)
  result = evaluate(eval_config(digits_dir, ema_checkpoint, moving_average_decay=0.9))
  assert result.num_examples == NUM_TEST
  assert result.accuracy == pytest.approx(expected[0], abs=1e-6)
  assert result.recall_at_5 == pytest.approx(expected[1], abs=1e-6)
  raw = accuracy_and_recall5(reference_logits(values, images), labels)
  plain = evaluate(eval_config(digits_dir, ema_checkpoint))
  assert plain.accuracy == pytest.approx(raw[0], abs=1e-6)


@pytest.mark.slow
def test_moving_average_restores_shadows_not_weights(digits_dir, test_split, tmp_path,
                                                     two_clone_checkpoint,
                                                     two_clone_reference):
  """A checkpoint whose raw weights and shadows differ on purpose: trained shadows, random
  raw weights. Each mode must score exactly as its own set of weights."""
  images, labels = test_split
  trained = checkpoint_values(two_clone_checkpoint)
  rng = np.random.RandomState(0)
  noise = {name: (0.05 * rng.standard_normal(trained[name].shape)).astype(np.float32)
           for name in LENET_VARIABLES}
  crafted = dict(noise)
  crafted.update({name + '/ExponentialMovingAverage': trained[name]
                  for name in LENET_VARIABLES})
  crafted['global_step'] = np.array(77, np.int64)
  prefix = write_checkpoint(str(tmp_path / 'crafted.ckpt'), crafted)
  expected_ema = accuracy_and_recall5(two_clone_reference, labels)   # `trained`'s logits
  expected_raw = accuracy_and_recall5(reference_logits(noise, images), labels)
  assert expected_ema[0] != expected_raw[0]
  with_ema = evaluate(eval_config(digits_dir, prefix, moving_average_decay=0.9999))
  without = evaluate(eval_config(digits_dir, prefix))
  assert with_ema.global_step == 77
  assert with_ema.accuracy == pytest.approx(expected_ema[0], abs=1e-6)
  # Random weights give near-tied logits; summation order (oneDNN threading under load)
  # may flip one argmax against the NumPy reference, so allow one example of difference.
  assert without.accuracy == pytest.approx(expected_raw[0], abs=1.01 / NUM_TEST)


@pytest.mark.slow
def test_batch_norm_evaluates_with_moving_statistics(digits_dir, test_split,
                                                     tmp_path_factory):
  """The shared LeNet run with batch norm (tests/trained_runs.py, 3 steps): its moving
  statistics have moved off their start, and evaluation uses them."""
  images, labels = test_split
  checkpoint = os.path.join(trained_runs.lenet_run(tmp_path_factory, digits_dir),
                            'model.ckpt-3')
  values = checkpoint_values(checkpoint)
  assert np.any(values['LeNet/conv1/BatchNorm/moving_mean'] != 0)
  expected = accuracy_and_recall5(
      reference_logits(values, images, use_batch_norm=True), labels)
  metrics = evaluate(eval_config(digits_dir, checkpoint, use_batch_norm=True))
  assert metrics.num_examples == NUM_TEST
  assert metrics.accuracy == pytest.approx(expected[0], abs=1e-6)
  # Without batch norm the model does not match the checkpoint (no biases there).
  with pytest.raises(ConfigError):
    evaluate(eval_config(digits_dir, checkpoint))


@pytest.mark.slow
def test_min_accuracy_compares_counts(digits_dir, test_split, two_clone_checkpoint,
                                      two_clone_reference, capsys):
  """Exactly k of 20 correct (counted in NumPy) passes --min_accuracy=k/20, written as the
  decimal it is, and not (k + 1)/20: counts are compared, not a float32 ratio."""
  _, labels = test_split
  config = eval_config(digits_dir, two_clone_checkpoint, batch_size=20, max_num_batches=1)
  results = list(run.evaluations(config))
  predicted = np.argmax(two_clone_reference[:20], axis=1)
  correct = int(np.sum(predicted == labels[:20]))
  assert (results[0].metrics.top1_correct, results[0].metrics.num_examples) == (correct, 20)
  at = dataclasses.replace(config, min_accuracy=float('%.2f' % (correct / 20)))
  assert run.exit_status(at, results) == errors.OK
  above = dataclasses.replace(config, min_accuracy=(correct + 1) / 20)
  assert run.exit_status(above, results) == errors.BELOW_TARGET
  assert capsys.readouterr().err == 'error: accuracy %.4f (%d/20) is below --min_accuracy=%s\n' % (
      correct / 20, correct, (correct + 1) / 20)


@pytest.mark.slow
def test_max_num_batches_limits_the_examples(digits_dir, test_split, two_clone_checkpoint,
                                             two_clone_reference):
  _, labels = test_split
  result = evaluate(eval_config(digits_dir, two_clone_checkpoint, batch_size=100,
                                max_num_batches=1))
  assert result.num_examples == 100
  # Evaluation reads the files in order: the first 100 records.
  expected = accuracy_and_recall5(two_clone_reference[:100], labels[:100])
  assert result.accuracy == pytest.approx(expected[0], abs=1e-6)


def test_missing_checkpoint_is_a_config_error(digits_dir, tmp_path):
  missing = str(tmp_path / 'no' / 'model.ckpt-1')
  with pytest.raises(ConfigError, match='checkpoint_path'):
    evaluate(eval_config(digits_dir, missing))
  with pytest.raises(ConfigError, match='holds no checkpoint'):
    evaluate(eval_config(digits_dir, str(tmp_path)))


@pytest.mark.slow
def test_checkpoint_of_another_class_count_is_a_config_error(digits_dir,
                                                            two_clone_checkpoint):
  with pytest.raises(ConfigError) as error:
    evaluate(eval_config(digits_dir, two_clone_checkpoint, labels_offset=1))
  assert two_clone_checkpoint in str(error.value)
  assert "has 9" in str(error.value)


@pytest.mark.slow
def test_checkpoint_of_another_model_is_a_config_error(digits_dir, two_clone_checkpoint):
  with pytest.raises(ConfigError) as error:
    evaluate(eval_config(digits_dir, two_clone_checkpoint, model_name='cifarnet'))
  assert two_clone_checkpoint in str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize('suffix', ['.index', '.data-00000-of-00001'])
def test_checkpoint_file_evaluates_its_prefix(digits_dir, two_clone_checkpoint, suffix):
  """model.ckpt-N.index (or .data-...) is a file of checkpoint model.ckpt-N, which matches
  the model: evaluate it, or refuse with a ConfigError that does not blame the model."""
  try:
    result = evaluate(eval_config(digits_dir, two_clone_checkpoint + suffix))
  except ConfigError as error:
    assert 'does not match' not in str(error)
    return
  assert result.checkpoint == two_clone_checkpoint
  assert result.num_examples == NUM_TEST


@pytest.fixture
def some_checkpoint(tmp_path):
  """A checkpoint that exists (of no model): the config's other rules come after it."""
  return placeholder_checkpoint(tmp_path)


@pytest.mark.parametrize('flag', ['checkpoint_path', 'dataset_name', 'dataset_dir',
                                  'model_name'])
def test_required_flags(digits_dir, some_checkpoint, flag):
  config = dataclasses.replace(eval_config(digits_dir, some_checkpoint), **{flag: None})
  with pytest.raises(ConfigError, match='--%s is required' % flag):
    evaluate(config)


def test_a_mistyped_run_dir_is_the_first_error(tmp_path):
  """Before the flags its record would have given (--model_name, --dataset_name)."""
  (tmp_path / 'runs' / 'ucf101_rgb_s1').mkdir(parents=True)
  typo = str(tmp_path / 'runs' / 'ucf101_rgb_s2')
  with pytest.raises(ConfigError) as error:
    evaluate(EvalConfig(checkpoint_path=typo))
  assert str(error.value) == (
      '--checkpoint_path=%s: no such checkpoint, file or directory (similar: %s); give a '
      'training directory, a checkpoint prefix such as model.ckpt-1000, or one of its files'
      % (typo, tmp_path / 'runs' / 'ucf101_rgb_s1'))
  with pytest.raises(ConfigError, match='the directory holds no checkpoint'):
    evaluate(EvalConfig(checkpoint_path=str(tmp_path / 'runs')))


def test_bad_batch_size_and_model(digits_dir, some_checkpoint):
  with pytest.raises(ConfigError, match='--batch_size=0'):
    evaluate(eval_config(digits_dir, some_checkpoint, batch_size=0))
  with pytest.raises(ConfigError, match='model_name=nope'):
    evaluate(eval_config(digits_dir, some_checkpoint, model_name='nope'))
