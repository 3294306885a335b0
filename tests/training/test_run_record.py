"""Tests for training/run_record.py: a resumed run's learning-rate schedule against the one
its flags.cfg recorded. The rates are checked against the closed forms written out here
(cosine, exponential staircase), not against the schedule code."""

import dataclasses
import math
import types

import pytest
from absl import logging

from tf_compat import tf
from training import run_record
from training.config import TrainConfig

NUM_SAMPLES = 1437  # digits train split
COSINE = dict(learning_rate_decay_type='cosine', learning_rate=0.05,
              end_learning_rate=0.0005, max_number_of_steps=80, optimizer='momentum')


def cosine(step, lr, end, span):
  step = min(max(step, 0), span)
  return end + (lr - end) * 0.5 * (1 + math.cos(math.pi * step / span))


def _record(tmp_path, config):
  path = tmp_path / run_record.FLAGFILE
  path.write_text('\n'.join(run_record.flag_lines(config)) + '\n')
  return str(path)


def test_the_recorded_flags_read_back_as_the_config(tmp_path):
  config = TrainConfig(dataset_name='digits', batch_size=16, random_flip=False,
                       learning_rate_boundaries=(10, 20),
                       learning_rate_values=(0.1, 0.01, 0.001), **COSINE)
  assert run_record.recorded_config(_record(tmp_path, config)) == config


def test_a_longer_cosine_is_named_with_the_rates_before_and_after(tmp_path):
  recorded = TrainConfig(**COSINE)
  longer = TrainConfig(**dict(COSINE, max_number_of_steps=200))
  changes, before, after = run_record.schedule_change(recorded, longer, NUM_SAMPLES, 80)
  assert changes == ['--max_number_of_steps 80 -> 200']
  assert before == pytest.approx(0.0005, rel=1e-5)   # the old cosine's end
  assert after == pytest.approx(cosine(80, 0.05, 0.0005, 200), rel=1e-5)
  assert after > 30 * before


def test_a_schedule_that_ignores_the_step_limit_keeps_its_rate(tmp_path):
  exponential = dict(learning_rate_decay_type='exponential', learning_rate=0.1,
                     learning_rate_decay_factor=0.5, num_epochs_per_decay=1.0)
  recorded = TrainConfig(max_number_of_steps=80, **exponential)
  changes, before, after = run_record.schedule_change(
      recorded, TrainConfig(max_number_of_steps=200, **exponential), NUM_SAMPLES, 80)
  # Decay every int(1437 / 32) = 44 steps: step 80 is after one decay.
  assert changes == ['--max_number_of_steps 80 -> 200']
  assert before == after == pytest.approx(0.05)
  assert run_record.schedule_change(recorded, recorded, NUM_SAMPLES, 80) is None
  # The global batch halved: epochs are twice as many steps, no decay yet at step 80.
  _, before, after = run_record.schedule_change(
      recorded, TrainConfig(max_number_of_steps=80, batch_size=16, **exponential),
      NUM_SAMPLES, 80)
  assert (before, after) == (pytest.approx(0.05), pytest.approx(0.1))


def _save_step(train_dir, step):
  """A checkpoint of `step` in train_dir, as training leaves one."""
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    with tf.Session() as sess:
      sess.run(global_step.assign(step))
      return tf.train.Saver().save(sess, str(train_dir / 'model.ckpt'), global_step=step)


def _start(train_dir, resume, **flags):
  config = TrainConfig(train_dir=str(train_dir), **flags)
  setup = types.SimpleNamespace(config=config, resume_checkpoint=resume,
                                dataset=types.SimpleNamespace(num_samples=NUM_SAMPLES))
  run_record.start_run(setup)
  return config


def test_resuming_a_longer_cosine_warns_in_one_line(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  _start(tmp_path, None, **COSINE)   # The first run records its flags.
  assert not caplog.records
  prefix = _save_step(tmp_path, 80)
  new = _start(tmp_path, prefix, **dict(COSINE, max_number_of_steps=200))
  warnings = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
  assert warnings == [
      'Resuming at global step 80 with another learning-rate schedule than the run '
      'recorded in %s (--max_number_of_steps 80 -> 200): the rate at step 80 was 0.0005, '
      'it is now %.6g' % (tmp_path / 'flags.cfg', cosine(80, 0.05, 0.0005, 200))]
  # Then the record is the new run's, so the next resume compares with it.
  assert run_record.recorded_config(str(tmp_path / 'flags.cfg')) == dataclasses.replace(
      new, train_dir=None)
  caplog.clear()
  _start(tmp_path, prefix, **dict(COSINE, max_number_of_steps=200))
  assert not caplog.records


def test_a_record_of_another_version_is_not_compared_and_says_so(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  (tmp_path / 'flags.cfg').write_text('--learning_rate=0.1\n--a_flag_long_gone=1\n')
  _start(tmp_path, _save_step(tmp_path, 5), **COSINE)
  messages = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
  assert len(messages) == 1 and 'a_flag_long_gone' in messages[0], messages
  assert 'not compared' in messages[0]


def test_resuming_with_another_global_batch_is_one_warning_naming_before_and_after(
    tmp_path, caplog):
  caplog.set_level(logging.INFO)
  _start(tmp_path, None, batch_size=32, num_clones=2, clone_on_cpu=True)
  prefix = _save_step(tmp_path, 40)
  _start(tmp_path, prefix, batch_size=32, num_clones=1)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
  assert warnings == [
      'Resuming at global step 40 with another global batch than the run recorded in %s: '
      '64 (32 per clone x 2 clone(s)) before, 32 (32 per clone x 1 clone(s)) now; each step '
      'from here takes the new batch, and a stop or schedule in epochs counts with it'
      % (tmp_path / 'flags.cfg')]


def test_an_all_reduce_job_resumed_on_its_cluster_is_not_told_its_batch_changed(
    tmp_path, caplog):
  """flags.cfg leaves the worker count out (where the run was): three workers all-reducing
  resume as three, with no warning (the count read back as 1 made one, 32 before, 96 now)."""
  caplog.set_level(logging.INFO)
  cluster = dict(batch_size=32, variable_update='replicated', worker_replicas=3,
                 sync_replicas=False)
  _start(tmp_path, None, **cluster)
  _start(tmp_path, _save_step(tmp_path, 40), **cluster)
  assert [r.getMessage() for r in caplog.records if r.levelname == 'WARNING'] == []
