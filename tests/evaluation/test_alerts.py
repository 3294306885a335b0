"""evaluation.alerts: the unsettled batch-norm warning from a record the real trainer
wrote (LeNet with batch norm, 3 steps; fine-tunes that restored their statistics or
not), and the one-class warning at exactly 90 %."""

import dataclasses
import logging
import math
import os

import numpy as np
import pytest

from evaluation import alerts, run
from evaluation.config import EvalConfig
from evaluation.metrics import classification_metrics
from evaluation.setup import from_run_records
from resolve.run_record import find_record
from tests import trained_runs
from tf_compat import tf


@pytest.fixture(scope='module')
def lenet(tmp_path_factory, digits_dir):
  """(train_dir, its record, its last checkpoint)."""
  train_dir = trained_runs.lenet_run(tmp_path_factory, digits_dir)
  return train_dir, find_record(train_dir), os.path.join(train_dir, 'model.ckpt-3')


def with_values(record, **values):
  return dataclasses.replace(record, values={**record.values, **values})


def test_a_few_steps_at_the_default_decay_have_not_settled(lenet):
  _, record, checkpoint = lenet
  line = alerts.unsettled_batch_norm(record, 'lenet', checkpoint, 3)
  assert line.startswith(checkpoint + ' (step 3): its batch-norm moving statistics cannot '
                         'have settled: 3 updates at --batch_norm_decay=0.999')
  assert 'they need 4998 (5 / -ln(decay))' in line   # lenet's own decay: the record has none


@pytest.mark.parametrize('decay, step, warned', [
    (0.5, 7, True), (0.5, 8, False),      # 5 / ln 2 = 7.2 updates
    (0.99, 497, True), (0.99, 498, False)])
def test_the_rule_is_decay_to_the_updates_against_e_to_the_minus_5(lenet, decay, step,
                                                                     warned):
  _, record, checkpoint = lenet
  record = with_values(record, batch_norm_decay=str(decay))
  assert (decay ** step > math.exp(-5)) == warned   # the rule, stated independently
  assert bool(alerts.unsettled_batch_norm(record, 'lenet', checkpoint, step)) == warned


def test_micro_batches_count_as_updates(lenet):
  _, record, checkpoint = lenet
  record = with_values(record, batch_norm_decay='0.5', num_micro_batches='2')
  assert alerts.unsettled_batch_norm(record, 'lenet', checkpoint, 4) is None  # 8 updates


@pytest.mark.parametrize('values', [{'precise_bn_batches': '4'},
                                    {'freeze_batch_norm': 'statistics'}])
def test_recomputed_or_frozen_statistics_are_not_warned_of(lenet, values):
  _, record, checkpoint = lenet
  assert alerts.unsettled_batch_norm(with_values(record, **values), 'lenet', checkpoint,
                                     3) is None


def test_no_record_no_warning(lenet):
  assert alerts.unsettled_batch_norm(None, 'lenet', lenet[2], 3) is None


def test_eval_of_the_run_from_its_record_alone_warns_in_one_line(lenet, digits_dir, caplog):
  """LeNet's record gives the model, its batch norm and the data; the warning follows."""
  train_dir, _, checkpoint = lenet
  caplog.set_level(logging.WARNING, logger='absl')
  config, settings = from_run_records(EvalConfig(checkpoint_path=checkpoint,
                                                 num_preprocessing_threads=1))
  assert (config.model_name, config.use_batch_norm, config.dataset_name,
          config.dataset_dir) == ('lenet', True, 'digits', digits_dir)
  [evaluated] = run.evaluations(config, settings)
  assert evaluated.result.num_examples == 360
  lines = [r.getMessage() for r in caplog.records if 'cannot have settled' in r.getMessage()]
  assert len(lines) == 1 and lines[0].startswith(checkpoint + ' (step 3)')


def metrics_predicting(predicted, labels, num_classes=3):
  scores = np.eye(num_classes)[predicted]
  return classification_metrics(scores, np.array(labels), num_classes)


def test_one_class_at_exactly_90_percent_of_the_predictions_is_warned_of():
  names = ['left', 'right', 'up']
  at_90 = metrics_predicting([1] * 9 + [0], [0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
  assert alerts.dominant_class('rgb', at_90, names) == (
      "rgb: 9 of 10 predictions (90.0 %) are class 1 'right', which holds 3 of the 10 "
      "labels: a collapsed model (batch-norm statistics that have not settled?)")
  below = metrics_predicting([1] * 17 + [0, 2], [0, 1, 2] * 6 + [0])   # 17 of 19: 89.5 %
  assert alerts.dominant_class('rgb', below, names) is None


# A fine-tune from a checkpoint whose statistics are not 0 / 1 (LeNet, 10 steps at
# decay 0.5), 3 steps at the default decay 0.999: what it restored did not start at 0 / 1.
@pytest.fixture(scope='module')
def settled_source(tmp_path_factory, digits_dir):
  train_dir = trained_runs.train(tmp_path_factory.mktemp('settled') / 'train', digits_dir,
                                 **{**trained_runs.LENET_FLAGS, 'batch_norm_decay': 0.5,
                                    'max_number_of_steps': 10})
  return os.path.join(train_dir, 'model.ckpt-10')


def fine_tune(tmp_path_factory, digits_dir, source, **flags):
  """(its record, its checkpoint at step 3)."""
  train_dir = trained_runs.train(tmp_path_factory.mktemp('fine_tuned') / 'train',
                                 digits_dir, checkpoint_path=source,
                                 **{**trained_runs.LENET_FLAGS, **flags})
  return find_record(train_dir), os.path.join(train_dir, 'model.ckpt-3')


def statistics_of(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if name.endswith(('/moving_mean', '/moving_variance'))}


def test_the_source_statistics_are_far_from_their_start(settled_source):
  far = [name for name, value in statistics_of(settled_source).items()
         if np.abs(value - (1.0 if name.endswith('variance') else 0.0)).max() > 0.05]
  assert len(far) == 6   # conv1, conv2, fc3: a mean and a variance each


def test_a_fine_tune_that_restored_its_statistics_is_not_warned_of(
    tmp_path_factory, digits_dir, settled_source):
  record, checkpoint = fine_tune(tmp_path_factory, digits_dir, settled_source)
  start = statistics_of(settled_source)
  assert all(np.allclose(value, start[name], atol=0.05)   # 3 updates at 0.999: restored
             for name, value in statistics_of(checkpoint).items())
  assert alerts.unsettled_batch_norm(record, 'lenet', checkpoint, 3) is None


def test_statistics_excluded_from_the_restore_are_still_warned_of(
    tmp_path_factory, digits_dir, settled_source):
  record, checkpoint = fine_tune(tmp_path_factory, digits_dir, settled_source,
                                 checkpoint_exclude_scopes=('LeNet/fc3/BatchNorm',))
  line = alerts.unsettled_batch_norm(record, 'lenet', checkpoint, 3)
  assert ('(mean 0, variance 1) 100 %% (2 of the 6 moving statistics, e.g. '
          'LeNet/fc3/BatchNorm/moving_mean: the others were restored from '
          '--checkpoint_path=%s); they need 4998' % settled_source) in line


def test_with_ignore_missing_vars_only_what_the_source_holds_was_restored(
    lenet, tmp_path, settled_source):
  _, record, checkpoint = lenet
  without_statistics = str(tmp_path / 'no_batch_norm.ckpt')
  with tf.Graph().as_default():
    tf.Variable(np.zeros([5, 5, 1, 32], np.float32), name='LeNet/conv1/weights')
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, without_statistics)
  statistics = sorted(statistics_of(checkpoint))
  for source, restored in [(without_statistics, set()), (settled_source, set(statistics))]:
    fine_tuned = with_values(record, checkpoint_path=source, ignore_missing_vars='true')
    assert alerts.restored_statistics(fine_tuned, 'lenet', statistics) == restored
  moved = with_values(record, checkpoint_path=str(tmp_path / 'moved'),
                      ignore_missing_vars='true')   # unreadable here: the record decides
  assert alerts.restored_statistics(moved, 'lenet', statistics) == set(statistics)
