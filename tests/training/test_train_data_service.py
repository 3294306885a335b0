"""The trainer reading its batches from a real tf.data service (tests/data_service.py: a
dispatcher and data workers, each `python -m datasets.data_service`).

  * a single-process `python train_image_classifier.py` run (softmax regression on
    digits: the service, not the model, is the point) whose only data worker is killed:
    one `error:` line and status 138 after --step_timeout_secs, not a hang (a lost
    worker among others and a restarted dispatcher, in a cluster:
    tests/deployment/cluster/test_launch_local_data_service.py); before it, files sharding
    against that dispatcher (no fixed worker list) is one ConfigError line;
  * damaged video frames skipped on the data workers reach the trainer's log (the video
    named once) and TensorBoard (the counts), as they do without the service.
"""

import contextlib
import functools
import logging
import os
import re
import subprocess
import sys

import pytest

from core import errors
from core.errors import ConfigError
from tests import damaged_data, video_testdata
from tests.data_service import DataService, wait_for
from tests.training.test_train_damaged_data import FLAGS as VIDEO_FLAGS, _scalars
from training import train as train_module
from training.config import TrainConfig
from tests import leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP = re.compile(r'step (\d+)')

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _trainer(digits_dir, tmp_path, address):
  log = open(tmp_path / 'trainer.log', 'w')  # pylint: disable=consider-using-with
  process = subprocess.Popen(
      [sys.executable, 'train_image_classifier.py', '--dataset_name=digits',
       '--dataset_dir=' + digits_dir, '--model_name=softmax_regression', '--clone_on_cpu',
       '--train_dir=%s' % (tmp_path / 'train'), '--batch_size=8', '--log_every_n_steps=5',
       '--num_readers=1', '--num_preprocessing_threads=1', '--save_interval_secs=600',
       '--data_service_address=' + address, '--step_timeout_secs=8'],
      cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
      preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid()))
  process.log_path = tmp_path / 'trainer.log'
  return process


def _text(process):
  return process.log_path.read_text()


def _last_step(process):
  steps = STEP.findall(_text(process))
  return int(steps[-1]) if steps else -1


def _steps_go_on(process, beyond):
  """Waits until the trainer logs a step past `beyond` (it must not have ended)."""
  wait_for(lambda: _last_step(process) > beyond or process.poll() is not None, 120,
           'a step past %d' % beyond)
  assert process.poll() is None, _text(process)
  return _last_step(process)


@pytest.fixture(scope='module')
def service(tmp_path_factory):
  """One dispatcher and data worker for the file (2 TensorFlow processes, not 4): the
  damaged frames' run reads from it, then the single-process run's trainer, which kills
  its worker (that test comes last)."""
  with DataService(tmp_path_factory.mktemp('service'), num_workers=1) as shared:
    yield shared


@contextlib.contextmanager
def _serving(service, directory):
  """The shared service while its worker lives; a new one (in `directory`) if a test
  before killed it (the file's order runs the killing test last)."""
  if service.workers[-1].poll() is None:
    yield service
  else:
    with DataService(directory, num_workers=1) as fresh:
      yield fresh


def test_damaged_frames_skipped_on_data_workers_reach_the_log_and_tensorboard(
    tmp_path, tmp_path_factory, caplog, service):
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = os.path.join(directory, 'train-00000-of-00002')
  video = damaged_data.break_frames(shard, 0, 'all')
  caplog.set_level(logging.INFO)
  with _serving(service, tmp_path / 'service') as serving:
    config = TrainConfig(dataset_dir=directory, train_dir=str(tmp_path / 'train'),
                         max_number_of_steps=6, max_damaged_fraction=0.5,
                         data_service_address=serving.address, **VIDEO_FLAGS)
    result = train_module.train(config)
  assert result.global_step == 6
  named = [r.getMessage() for r in caplog.records if r.getMessage().startswith('Skipping')]
  assert len(named) == 1 and named[0].startswith(
      'Skipping a clip of video %s (shard %s)' % (video, shard)), named
  scalars = _scalars(tmp_path / 'train')
  assert scalars['input/damaged_videos'][-1][1] == 1
  assert scalars['input/skipped_clips'][-1][1] >= 1
  # The input wait is timed on the draws from the service as on a local pipeline.
  assert 0.0 <= scalars['input/wait_share'][-1][1] <= 1.0


def test_every_data_worker_gone_ends_a_single_process_run_with_one_line(digits_dir, tmp_path,
                                                                        service):
  """No cluster, so no parameter server to wait for: the watchdog is armed by the data
  service alone (training.session_loop.supervised_train's input_state). It kills the
  shared service's worker: it runs last."""
  with _serving(service, tmp_path / 'service') as serving:
    # Files sharding needs the dispatcher's fixed list of workers, which this one lacks.
    with pytest.raises(ConfigError, match='--data_service_sharding=files: the dispatcher at '
                       '%s has no fixed list of data workers holding %s' % (
                           serving.address, serving.workers[-1].address)):
      train_module.train(TrainConfig(
          dataset_name='digits', dataset_dir=digits_dir, model_name='softmax_regression',
          clone_on_cpu=True, train_dir=str(tmp_path / 'files'), max_number_of_steps=5,
          data_service_address=serving.address, data_service_sharding='files'))
    trainer = _trainer(digits_dir, tmp_path, serving.address)
    try:
      _steps_go_on(trainer, 10)
      serving.kill_worker(len(serving.workers) - 1)
      assert trainer.wait(timeout=180) == errors.CLUSTER
    finally:
      if trainer.poll() is None:
        trainer.kill()
  text = _text(trainer)
  gone = [line for line in text.splitlines() if 'gone; none is left' in line]
  assert len(gone) <= 1  # Said at a progress line, if one came before the last batch.
  error_lines = [line for line in text.splitlines() if line.startswith('error:')]
  assert error_lines == [
      'error: no training step finished for 8 s (--step_timeout_secs): no input comes; '
      'the tf.data service at %s has no data worker left (start one: python -m '
      'datasets.data_service --role=worker --dispatcher_address=%s)'
      % (serving.address, serving.address)], text[-3000:]
