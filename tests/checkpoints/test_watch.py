"""checkpoints.watch on checkpoints written here by tf.train.Saver, with a fake clock.

The fake `sleep` is where the "trainer" acts: each call advances the clock and may save a
checkpoint, write a half checkpoint, or leave the training_done marker.
"""

import json
import os
import shutil

import numpy as np

from checkpoints import end_marker, paths, watch
from tf_compat import tf


class Trainer:
  """Saves tiny checkpoints into train_dir the way slim.learning.train's Saver does."""

  def __init__(self, train_dir, max_to_keep=5):
    self.train_dir = str(train_dir)
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.step = tf.train.get_or_create_global_step()
      self.weights = tf.Variable(np.zeros(3, np.float32), name='weights')
      self.saver = tf.train.Saver(max_to_keep=max_to_keep)
      self.sess = tf.Session()
      self.sess.run(tf.global_variables_initializer())

  def save(self, step):
    with self.graph.as_default():
      self.step.load(step, self.sess)
      return self.saver.save(self.sess, os.path.join(self.train_dir, 'model.ckpt'),
                             global_step=step)

  def finish(self, step, status=end_marker.FINISHED):
    """The trainer's own end marker (the writer training uses)."""
    end_marker.write_end_marker(str(self.train_dir), status, step)


class Clock:
  """Fake time; `sleep` advances it and runs the next scripted trainer action."""

  def __init__(self, actions=()):
    self.now = 0.0
    self.actions = list(actions)
    self.sleeps = 0

  def __call__(self):
    return self.now

  def sleep(self, seconds):
    self.now += seconds
    self.sleeps += 1
    if self.actions:
      self.actions.pop(0)()


def run_watch(train_dir, clock, **kwargs):
  kwargs.setdefault('timeout', 100.0)
  return [paths.checkpoint_step(p) for p in watch.watch_checkpoints(
      str(train_dir), poll_secs=10.0, clock=clock, sleep=clock.sleep, **kwargs)]


def test_each_checkpoint_once_in_order_until_the_last_step(tmp_path):
  trainer = Trainer(tmp_path)
  trainer.save(10)
  clock = Clock([lambda: None, lambda: trainer.save(20), lambda: (trainer.save(30),
                                                                  trainer.save(40))])
  assert run_watch(tmp_path, clock, last_step=40) == [10, 20, 30, 40]
  assert clock.sleeps == 3  # Stopped right after step 40, without waiting for a timeout.


def test_training_done_marker_ends_the_watch_even_after_the_last_checkpoint(tmp_path):
  trainer = Trainer(tmp_path)
  clock = Clock([lambda: trainer.save(5), lambda: None, lambda: trainer.finish(5)])
  assert run_watch(tmp_path, clock) == [5]
  assert clock.now == 30.0


def test_a_stopped_run_is_watched_until_the_timeout_and_its_restart_followed(tmp_path):
  trainer = Trainer(tmp_path)
  clock = Clock([lambda: (trainer.save(5), trainer.finish(5, end_marker.STOPPED)),
                 lambda: None, lambda: trainer.save(8), lambda: trainer.finish(9),
                 lambda: trainer.save(9)])
  assert run_watch(tmp_path, clock, timeout=25.0) == [5, 8, 9]
  assert clock.now == 50.0  # Ended by the finished marker, not by the timeout.


def test_a_stopped_run_that_never_restarts_ends_at_the_timeout(tmp_path):
  trainer = Trainer(tmp_path)
  trainer.save(5)
  trainer.finish(5, end_marker.STOPPED)
  clock = Clock()
  assert run_watch(tmp_path, clock, timeout=35.0) == [5]
  assert clock.now == 40.0


def test_an_old_marker_reads_as_finished(tmp_path):
  with open(os.path.join(tmp_path, watch.TRAINING_DONE_FILE), 'w') as handle:
    json.dump({'global_step': 7}, handle)
  assert end_marker.read_end_marker(str(tmp_path)) == end_marker.EndMarker('finished', 7, '')


def test_timeout_without_new_checkpoints(tmp_path):
  trainer = Trainer(tmp_path)
  trainer.save(1)
  clock = Clock()
  assert run_watch(tmp_path, clock, timeout=35.0, last_step=100) == [1]
  assert clock.now == 40.0


def test_a_directory_that_does_not_exist_yet_is_waited_for(tmp_path):
  train_dir = tmp_path / 'later'
  def create():
    train_dir.mkdir()
    Trainer(train_dir).save(3)
  clock = Clock([lambda: None, create])
  assert run_watch(train_dir, clock, last_step=3) == [3]


def test_a_half_written_checkpoint_waits_until_complete(tmp_path):
  """A listed checkpoint missing its data shard (or with a truncated index) is not read;
  the later checkpoints wait behind it so the order stays by step."""
  trainer = Trainer(tmp_path / 'source')
  prefix = trainer.save(50)
  train_dir = tmp_path / 'train'
  train_dir.mkdir()
  target = str(train_dir / 'model.ckpt-50')
  shutil.copy(prefix + '.index', target + '.index')
  with open(str(train_dir / 'checkpoint'), 'w') as handle:
    handle.write('model_checkpoint_path: "model.ckpt-50"\n'
                 'all_model_checkpoint_paths: "model.ckpt-50"\n')
  assert not paths.is_complete(target)
  data = [p for p in os.listdir(str(tmp_path / 'source')) if p.startswith('model.ckpt-50.data')]

  def copy_data():
    shutil.copy(os.path.join(str(tmp_path / 'source'), data[0]), str(train_dir / data[0]))

  clock = Clock([lambda: None, lambda: None, copy_data])
  assert run_watch(train_dir, clock, last_step=50) == [50]
  assert clock.sleeps == 3  # Not handed out before its data file was in place.


def test_truncated_index_is_not_complete(tmp_path):
  prefix = Trainer(tmp_path).save(2)
  assert paths.is_complete(prefix)
  with open(prefix + '.index', 'r+b') as handle:
    handle.truncate(10)
  assert not paths.is_complete(prefix)


def test_checkpoints_deleted_by_max_to_keep_are_skipped(tmp_path):
  trainer = Trainer(tmp_path, max_to_keep=2)
  handed = []
  generator = watch.watch_checkpoints(str(tmp_path), last_step=4, timeout=50.0,
                                      poll_secs=1.0, clock=Clock(), sleep=lambda s: None)
  trainer.save(1)
  handed.append(next(generator))
  for step in (2, 3, 4):  # While step 1 is "evaluated", 2 is written and then deleted.
    trainer.save(step)
  handed.extend(generator)
  assert [paths.checkpoint_step(p) for p in handed] == [1, 3, 4]


def test_listed_checkpoints_are_sorted_by_step(tmp_path):
  trainer = Trainer(tmp_path)
  for step in (100, 20, 3):
    trainer.save(step)
  assert [paths.checkpoint_step(p) for p in paths.listed_checkpoints(str(tmp_path))] == [
      3, 20, 100]
  assert paths.listed_checkpoints(str(tmp_path / 'none')) == []


def test_a_listed_checkpoint_whose_files_are_gone_is_skipped(tmp_path):
  """The state file read just before the Saver deleted a checkpoint: skip it, go on."""
  trainer = Trainer(tmp_path)
  first = trainer.save(1)
  trainer.save(2)
  for name in os.listdir(str(tmp_path)):
    if name.startswith('model.ckpt-1.'):
      os.remove(str(tmp_path / name))
  assert paths.listed_checkpoints(str(tmp_path))[0] == first
  assert run_watch(tmp_path, Clock(), last_step=2) == [2]
