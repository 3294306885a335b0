"""eval.py --watch beside a real trainer, the watch in a thread of the test's own process
(tests/entries.py `evaluate`, as eval.py's main runs it) and the trainer in its main
thread (training.train.train, as train_image_classifier.py runs it): each checkpoint is
evaluated once, the trainer's end marker ends the watch, and a `stopped` marker does not.
The one trainer stopped by SIGTERM is a real process: the signal is the point there.
The I3D run the watch follows has 2 clones and moving averages: its last checkpoint is
also checked as evaluation's (tests/evaluation/test_video_eval.py) against a reference."""

import functools
import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from checkpoints import end_marker, paths
from core.params import config_from_argv
from deployment.cluster.process_guards import die_with_parent
from evaluation import run
from tests import video_testdata as vt
from tests.evaluation import test_video_eval as video_eval
from tests.entries import ROOT, evaluate
from tf_compat import tf
from training.config import TrainConfig
from training.train import train

I3D_FLAGS = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
             '--dataset_name=video_folder']


class Watch:
  """eval.py's main on `argv` (a --watch) in a thread: `join()` -> its exit status;
  `runs`, the evaluations in order."""

  def __init__(self, argv):
    self.status, self.runs, self._error = None, [], None
    self._thread = threading.Thread(target=self._watch, args=(argv,), name='eval-watch',
                                    daemon=True)   # ends by --watch_timeout if a test fails
    self._thread.start()

  def _watch(self, argv):
    try:
      self.status, _ = evaluate(argv, on_result=self.runs.append)
    except BaseException as error:  # pylint: disable=broad-except
      self._error = error           # raised again by join(), in the test

  def is_alive(self):
    return self._thread.is_alive()

  def join(self, timeout):
    self._thread.join(timeout)
    assert not self._thread.is_alive(), 'the watch did not end within %g s' % timeout
    if self._error is not None:
      raise self._error
    return self.status


@pytest.fixture
def absl_info(caplog):
  caplog.set_level(logging.INFO, logger='absl')
  return caplog


@pytest.mark.slow
def test_watch_beside_training_evaluates_each_checkpoint_once(tmp_path, tmp_path_factory,
                                                              absl_info):
  """The watch starts before the training directory exists, evaluates each new
  checkpoint once as the trainer saves it (every 4 steps: 2 checkpoints, however fast the
  steps; an 8-step run can end within a second, and the watch hands out older checkpoints
  too), and ends by itself after the last step: no step count is given, the trainer's end
  marker ends the watch. (8 steps, not 12: each checkpoint is one more I3D evaluation.)

  The run is a real 2-clone run with moving averages, and the watch's evaluation of its
  last checkpoint is checked as test_video_eval checks evaluations (a run of its own
  there cost one more I3D training): the checkpoint holds no clone prefix, evaluates to
  the reference of its averaged weights, and the same values saved from a plain
  one-device graph give the same numbers."""
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  train_dir, eval_dir, steps = tmp_path / 'train', tmp_path / 'eval', 8
  watch = Watch(I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--checkpoint_path=%s' % train_dir, '--watch',
      '--watch_poll_secs=0.5', '--watch_timeout=240',
      '--eval_dir=%s' % eval_dir, '--eval_image_size=32', '--clip_frames=4',
      '--batch_size=6', '--num_preprocessing_threads=1'])
  config, _ = config_from_argv(TrainConfig, I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--train_dir=%s' % train_dir, '--clip_frames=4',
      '--train_image_size=32', '--batch_size=2', '--max_number_of_steps=%d' % steps,
      '--num_clones=2', '--clone_on_cpu', '--moving_average_decay=0.5',
      '--save_interval_secs=0', '--save_interval_steps=4', '--save_summaries_secs=600',
      '--optimizer=sgd', '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
      '--num_readers=1', '--num_preprocessing_threads=1', '--log_every_n_steps=1'])
  train(config)
  assert watch.join(300) == 0
  printed = '\n'.join(run.summary(result) for result in watch.runs)
  logs = 'watch printed:\n%s' % printed
  reports = []
  for path in glob.glob(str(eval_dir / 'report-*.json')):
    with open(path) as handle:
      reports.append(json.load(handle)['streams']['rgb']['checkpoint'])
  tables = printed.count('video_folder/test: 6 videos, 1 clip x 4 frames')
  assert tables == len(reports) >= 2, logs  # each evaluated checkpoint printed once
  assert max(paths.checkpoint_step(p) for p in reports) == steps, logs
  # Every checkpoint the trainer still lists was evaluated (older ones may have been
  # deleted by its Saver before the watcher got to them).
  kept = set(paths.listed_checkpoints(str(train_dir)))
  assert kept <= set(reports), (kept, reports, logs)

  last = watch.runs[-1].result   # handed out in step order: the last step's
  reader = tf.train.load_checkpoint(last.primary.checkpoint)
  values = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
  assert not [name for name in values if 'clone' in name]
  shadows = {name[:-len(vt.EMA)]: value for name, value in values.items()
             if name.endswith(vt.EMA)}
  assert 'InceptionV1/Conv3d_1a_7x7/BatchNorm/moving_mean' in shadows
  plain = vt.write_checkpoint(str(tmp_path / 'plain' / ('model.ckpt-%d' % steps)), {
      name: value for name, value in values.items()
      if name in shadows or name.endswith(vt.EMA) or name == 'global_step'})
  plain_result = video_eval.evaluate(video_eval.config(
      rgb_dir, plain, clip_frames=4, batch_size=6, num_preprocessing_threads=1)).result
  expected = video_eval.reference(rgb_dir, shadows, eval_clips=1, clip_frames=4)
  for result in (last, plain_result):
    assert result.global_step == steps and result.primary.moving_averages
    video_eval.check_against_reference(result.primary, expected, result.metrics['rgb'])
  np.testing.assert_array_equal(last.primary.logits, plain_result.primary.logits)


@pytest.mark.slow
def test_watch_goes_on_after_a_stopped_run_and_ends_after_its_restart_finishes(
    tmp_path, digits_dir, absl_info):
  """A trainer stopped by SIGTERM (a real process) leaves a `stopped` marker: the watch
  logs it and keeps watching; the same run restarted to its end leaves `finished`, and the
  watch evaluates the last checkpoint and ends by itself, long before its timeout."""
  train_dir = tmp_path / 'train'
  train_flags = ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
                 '--model_name=lenet', '--train_dir=%s' % train_dir, '--batch_size=16',
                 '--save_interval_secs=1', '--log_every_n_steps=1', '--num_readers=1',
                 '--num_preprocessing_threads=1']
  watch = Watch([
      '--dataset_name=digits', '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--checkpoint_path=%s' % train_dir, '--watch', '--watch_poll_secs=0.5',
      '--watch_timeout=240'])
  log_path = tmp_path / 'train1.log'
  with open(log_path, 'w') as log:
    first = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, 'train_image_classifier.py'] + train_flags, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT), stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=functools.partial(die_with_parent, os.getpid()))
  try:
    _wait_for(lambda: paths.latest_checkpoint(str(train_dir)) is not None, first.poll,
              log_path)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 0, log_path.read_text()[-3000:]
  finally:
    if first.poll() is None:
      first.kill()
      first.wait()
  stopped = end_marker.read_end_marker(str(train_dir))
  assert stopped.status == end_marker.STOPPED
  _wait_for(lambda: any('Training was stopped at step' in r.getMessage()
                        for r in list(absl_info.records)),
            lambda: None if watch.is_alive() else watch.join(0), log_path)
  assert watch.is_alive()  # still watching for the restart
  config, _ = config_from_argv(TrainConfig, train_flags + [
      '--max_number_of_steps=%d' % (stopped.global_step + 5)])
  train(config)   # the restart, to its end
  started = time.monotonic()
  status = watch.join(200)
  final = end_marker.read_end_marker(str(train_dir))
  assert final.status == end_marker.FINISHED
  assert status == 0
  assert time.monotonic() - started < 120  # ended by the marker, not by --watch_timeout
  printed = run.summary(watch.runs[-1])
  assert printed.splitlines()[-1].endswith('step %d)' % final.global_step), printed


def _wait_for(condition, ended, log_path, timeout=180):
  """Polls `condition` until it holds; fails when `ended()` says the process or the watch
  ended first (its status), or after `timeout` seconds."""
  deadline = time.monotonic() + timeout
  while not condition():
    status = ended()
    assert status is None, 'ended early with %s; %s' % (status, log_path.read_text()[-3000:])
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.2)
