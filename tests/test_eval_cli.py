"""eval.py as users run it: real processes, one `error:` line for bad input, --watch
beside a real training job (train_image_classifier.py on the synthetic videos), and
evaluation from a run's own record (tests/trained_runs.py: the real trainer's flags.cfg)."""

import functools
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from checkpoints import end_marker, paths
from tests import trained_runs
from tests import video_testdata as vt
from tests import leftovers
from core import errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
I3D_FLAGS = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
             '--dataset_name=video_folder']


def env(as_users=True):
  """This environment with PYTHONPATH; `as_users`: also without the variables that hide or
  add TensorFlow's start-up notices, as a user's shell has it. The one-line error tests
  need that (the entry must hide the notices itself: a fresh start, tests/prestarted.py);
  the others check what eval.py does once started."""
  values = dict(os.environ, PYTHONPATH=ROOT)
  if as_users:
    for name in ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS'):
      values.pop(name, None)
  return values


def start(script, args, log_path):
  log = open(log_path, 'w')  # pylint: disable=consider-using-with
  return subprocess.Popen([sys.executable, script] + args, cwd=ROOT, env=env(False),
                          stdout=subprocess.PIPE, stderr=log, text=True,
                          preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid())), log


def run(script, args, as_users=True):
  return subprocess.run([sys.executable, script] + args, cwd=ROOT, env=env(as_users),
                        capture_output=True, text=True, timeout=300)


def assert_one_error_line(result, *texts, status=errors.USAGE):
  report = 'exit %d\nstdout:\n%s\nstderr:\n%s' % (result.returncode, result.stdout,
                                                  result.stderr)
  assert 'Traceback' not in result.stderr, report
  assert result.returncode == status, report
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), report
  for text in texts:
    assert text in lines[0], report


def test_bad_input_gets_one_error_line(tmp_path, tmp_path_factory):
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  flow_prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'flow')
  common = I3D_FLAGS + ['--dataset_dir=%s' % rgb_dir, '--eval_image_size=32']
  cases = {
      'missing checkpoint': (['--checkpoint_path=%s' % (tmp_path / 'none')],
                             ['--checkpoint_path=', 'no such checkpoint']),
      'wrong modality': (['--checkpoint_path=%s' % flow_prefix],
                         ['takes 2-channel input (flow)', 'holds rgb records']),
  }
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results = {name: pool.submit(run, 'eval.py', common + args)
               for name, (args, _) in cases.items()}
  for name, (_, texts) in cases.items():
    assert_one_error_line(results[name].result(), *texts)


def test_a_mistyped_run_dir_is_the_first_and_only_error(tmp_path):
  """`eval.py --checkpoint_path=TYPO` alone: the checkpoint's line, naming the run dir
  beside it, not --model_name (which the run's record would have given)."""
  (tmp_path / 'ucf101_rgb_s1').mkdir()
  typo = str(tmp_path / 'ucf101_rgb_s2')
  assert_one_error_line(run('eval.py', ['--checkpoint_path=%s' % typo]),
                        'error: --checkpoint_path=%s: no such checkpoint, file or directory '
                        '(similar: %s); give a training directory' % (
                            typo, tmp_path / 'ucf101_rgb_s1'))


def test_progress_reaches_stderr_that_is_not_a_terminal(tmp_path, tmp_path_factory):
  """stderr is a pipe, as in a pod's log: a progress line every 2 videos and at the end;
  stdout gives the table, the report and the confusion matrix PNG."""
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  eval_dir = tmp_path / 'eval'
  result = run('eval.py', I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--checkpoint_path=%s' % prefix, '--eval_image_size=32',
      '--eval_frames=8', '--batch_size=1', '--log_every_n_batches=2',
      '--num_preprocessing_threads=1', '--eval_dir=%s' % eval_dir], as_users=False)
  assert result.returncode == 0, result.stderr
  progress = [line.split('] ', 1)[-1] for line in result.stderr.splitlines()
              if re.search(r'\] rgb: \d+/6 videos', line)]
  assert [line.split(', ')[0] for line in progress] == [
      'rgb: 2/6 videos (33.3%)', 'rgb: 4/6 videos (66.7%)', 'rgb: 6/6 videos (100.0%)',
      'rgb: 6/6 videos (100.0%)']
  assert progress[0].endswith(' left') and progress[-1].endswith(' in all')
  assert 'videos/s' in progress[-1]
  assert 'report: %s' % (eval_dir / 'report-7.json') in result.stdout
  assert 'confusion matrix: %s' % (eval_dir / 'confusion-7-rgb.png') in result.stdout
  assert (eval_dir / 'confusion-7-rgb.png').stat().st_size > 1000


@pytest.mark.slow
def test_watch_beside_training_evaluates_each_checkpoint_once(tmp_path, tmp_path_factory):
  """eval.py --watch starts before the training directory exists, evaluates each new
  checkpoint once as the trainer saves it (every 4 steps: 3 checkpoints, however fast the
  steps; a 12-step run can end within a second), and exits by itself after the last step:
  no step count is given, the trainer's end marker ends the watch."""
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  train_dir, eval_dir, steps = tmp_path / 'train', tmp_path / 'eval', 12
  watcher, watch_log = start('eval.py', I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--checkpoint_path=%s' % train_dir, '--watch',
      '--watch_poll_secs=0.5', '--watch_timeout=240',
      '--eval_dir=%s' % eval_dir, '--eval_image_size=32', '--clip_frames=4',
      '--batch_size=6', '--num_preprocessing_threads=1'], tmp_path / 'eval.log')
  trainer, train_log = start('train_image_classifier.py', I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--train_dir=%s' % train_dir, '--clip_frames=4',
      '--train_image_size=32', '--batch_size=2', '--max_number_of_steps=%d' % steps,
      '--save_interval_secs=0', '--save_interval_steps=4', '--save_summaries_secs=600',
      '--optimizer=sgd', '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
      '--num_readers=1', '--num_preprocessing_threads=1', '--log_every_n_steps=1'],
      tmp_path / 'train.log')
  try:
    trainer.communicate(timeout=300)
    watch_out, _ = watcher.communicate(timeout=300)
  finally:
    for process, log in ((trainer, train_log), (watcher, watch_log)):
      if process.poll() is None:
        process.kill()
        process.wait()
      log.close()
  logs = '\n'.join('%s:\n%s' % (name, open(str(tmp_path / name)).read()[-6000:])
                   for name in ('train.log', 'eval.log'))
  logs += '\nexits: train %d, eval %d\neval stdout:\n%s' % (
      trainer.returncode, watcher.returncode, watch_out)
  assert trainer.returncode == 0 and watcher.returncode == 0, logs
  reports = []
  for path in glob.glob(str(eval_dir / 'report-*.json')):
    with open(path) as handle:
      reports.append(json.load(handle)['streams']['rgb']['checkpoint'])
  tables = watch_out.count('video_folder/test: 6 videos, 1 clip x 4 frames')
  assert tables == len(reports) >= 2, logs  # each evaluated checkpoint printed once
  assert max(paths.checkpoint_step(p) for p in reports) == steps, logs
  # Every checkpoint the trainer still lists was evaluated (older ones may have been
  # deleted by its Saver before the watcher got to them).
  kept = set(paths.listed_checkpoints(str(train_dir)))
  assert kept <= set(reports), (kept, reports, logs)


@pytest.mark.slow
def test_watch_goes_on_after_a_stopped_run_and_ends_after_its_restart_finishes(
    tmp_path, digits_dir):
  """A trainer stopped by SIGTERM leaves a `stopped` marker: the real watch logs it and
  keeps watching; the same run restarted to its end leaves `finished`, and the watch
  evaluates the last checkpoint and ends by itself, long before its timeout."""
  train_dir = tmp_path / 'train'
  train_flags = ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
                 '--model_name=lenet', '--train_dir=%s' % train_dir, '--batch_size=16',
                 '--save_interval_secs=1', '--log_every_n_steps=1', '--num_readers=1',
                 '--num_preprocessing_threads=1']
  watcher, watch_log = start('eval.py', [
      '--dataset_name=digits', '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--checkpoint_path=%s' % train_dir, '--watch', '--watch_poll_secs=0.5',
      '--watch_timeout=240'], tmp_path / 'eval.log')
  first, first_log = start('train_image_classifier.py', train_flags, tmp_path / 'train1.log')
  try:
    _wait_for(lambda: paths.latest_checkpoint(str(train_dir)) is not None, first)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 0
    assert end_marker.read_end_marker(str(train_dir)).status == end_marker.STOPPED
    _wait_for(lambda: 'Training was stopped at step' in open(str(tmp_path / 'eval.log')).read(),
              watcher)
    assert watcher.poll() is None  # still watching for the restart
    second = subprocess.run([sys.executable, 'train_image_classifier.py'] + train_flags + [
        '--max_number_of_steps=%d' % (end_marker.read_end_marker(str(train_dir)).global_step + 5)],
        cwd=ROOT, env=env(False), capture_output=True, text=True, timeout=300, check=False)
    assert second.returncode == 0, second.stderr[-3000:]
    started = time.monotonic()
    watch_out, _ = watcher.communicate(timeout=200)
  finally:
    for process, log in ((first, first_log), (watcher, watch_log)):
      if process.poll() is None:
        process.kill()
        process.wait()
      log.close()
  final = end_marker.read_end_marker(str(train_dir))
  assert final.status == end_marker.FINISHED
  assert watcher.returncode == 0, open(str(tmp_path / 'eval.log')).read()[-3000:]
  assert time.monotonic() - started < 120  # ended by the marker, not by --watch_timeout
  assert watch_out.splitlines()[-1].endswith('step %d)' % final.global_step), watch_out


def _wait_for(condition, process, timeout=180):
  deadline = time.monotonic() + timeout
  while not condition():
    assert process.poll() is None, 'process ended early with %s' % process.returncode
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.2)


# ------------------------------------------------------------- from the run's own record


def _stderr_lines(result, text):
  return [line.split('] ', 1)[-1] for line in result.stderr.splitlines() if text in line]


def _report(eval_dir):
  [path] = glob.glob(os.path.join(str(eval_dir), 'report-*.json'))
  with open(path) as handle:
    return json.load(handle)


@pytest.mark.slow
def test_eval_from_the_run_record_alone(tmp_path, tmp_path_factory):
  """A run of the real trainer (I3D 4 x 32 x 32 at depth 0.125, none of them I3D's
  defaults) evaluated with --checkpoint_path, --dataset_split_name and --eval_dir alone:
  the network, width, data, clip and crop are the run's and the report says so; a flag
  given wins, named in one line when it differs from the run's. (LeNet's record:
  tests/evaluation/test_alerts.py.)"""
  i3d = trained_runs.i3d_run(tmp_path_factory)
  cases = {'record': [], 'given': ['--clip_frames=6', '--depth_multiplier=0.125']}
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    futures = {name: pool.submit(run, 'eval.py', args + [
        '--checkpoint_path=%s' % i3d, '--dataset_split_name=test',
        '--eval_dir=%s' % (tmp_path / name)], as_users=False)
               for name, args in cases.items()}
  results = {name: future.result() for name, future in futures.items()}
  for name, result in results.items():
    assert result.returncode == 0, (name, result.stderr[-3000:])
  report = _report(tmp_path / 'record')
  assert report['sampling'] == {'mode': 'eval_clips', 'clips': 1, 'clip_frames': 4,
                                'crop_size': 32}
  assert report['model'] == {'name': 'i3d', 'num_classes': 3,
                             'net_kwargs': {'depth_multiplier': vt.DEPTH}}
  assert report['dataset']['dirs'] == {'rgb': vt.converted(tmp_path_factory, 'rgb')}
  settings = report['settings']['rgb']
  assert settings['record'] == os.path.join(i3d, 'flags.cfg')
  assert {name: settings[name]['from'] for name in (
      'model_name', 'depth_multiplier', 'dataset_name', 'dataset_dir', 'clip_frames',
      'eval_image_size', 'moving_average_decay')} == {
          'model_name': 'record', 'depth_multiplier': 'record', 'dataset_name': 'record',
          'dataset_dir': 'record', 'clip_frames': 'record', 'eval_image_size': 'record',
          'moving_average_decay': 'default'}
  [described] = _stderr_lines(results['record'], 'settings from the run\'s record')
  assert 'eval_image_size=32 (record: --train_image_size)' in described
  assert not _stderr_lines(results['record'], 'differ from the run')
  given = _report(tmp_path / 'given')
  assert given['sampling']['clip_frames'] == 6
  assert given['settings']['rgb']['clip_frames'] == {'value': 6, 'from': 'flag'}
  assert _stderr_lines(results['given'], 'differ from the run') == [
      'given flags differ from the run\'s record %s/flags.cfg: --clip_frames=6 (the run: '
      '--clip_frames=4)' % i3d]
  for result in results.values():   # 2 steps at decay 0.999
    assert len(_stderr_lines(result, 'cannot have settled')) == 1


@pytest.mark.slow
def test_a_moved_run_needs_its_dataset_dir(tmp_path, digits_dir):
  """A run whose records moved away: one error line naming --dataset_dir."""
  shutil.copytree(digits_dir, tmp_path / 'data')
  trained_runs.train(tmp_path / 'train', str(tmp_path / 'data'), **trained_runs.LENET_FLAGS)
  shutil.move(str(tmp_path / 'data'), str(tmp_path / 'moved'))
  result = run('eval.py', ['--checkpoint_path=%s' % (tmp_path / 'train'),
                           '--dataset_split_name=test'])
  assert_one_error_line(result, '--dataset_dir is needed: the run\'s record %s/flags.cfg '
                        'names --dataset_dir=%s, which no longer exists' % (
                            tmp_path / 'train', tmp_path / 'data'))
