"""eval.py's path in the test's own process (tests/entries.py `evaluate`: the command line
read as eval.py reads it, from_run_records, run.evaluations, run.exit_status): one `error:`
line for bad input, the progress lines and the files, and evaluation from a run's own
record (tests/trained_runs.py: the real trainer's flags.cfg). eval.py in a fresh process:
tests/test_eval_cli.py; --watch beside a trainer: tests/evaluation/test_watch.py."""

import glob
import json
import logging
import os
import re
import shutil

import pytest

from evaluation import run
from tests import trained_runs
from tests import video_testdata as vt
from tests.entries import assert_one_error_line_printed, evaluate

I3D_FLAGS = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
             '--dataset_name=video_folder']


@pytest.fixture
def absl_info(caplog):
  """absl's lines from INFO up, as eval.py's main sets its verbosity."""
  caplog.set_level(logging.INFO, logger='absl')
  return caplog


def test_bad_input_gets_one_error_line(tmp_path, tmp_path_factory, capsys):
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  flow_prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'flow')
  common = I3D_FLAGS + ['--dataset_dir=%s' % rgb_dir, '--eval_image_size=32']
  cases = {
      'missing checkpoint': (['--checkpoint_path=%s' % (tmp_path / 'none')],
                             ['--checkpoint_path=', 'no such checkpoint']),
      'wrong modality': (['--checkpoint_path=%s' % flow_prefix],
                         ['takes 2-channel input (flow)', 'holds rgb records']),
  }
  for args, texts in cases.values():
    status, results = evaluate(common + args)
    assert not results
    assert_one_error_line_printed(capsys, status, *texts)


def test_progress_lines_the_table_the_report_and_the_figure(tmp_path, tmp_path_factory,
                                                           absl_info):
  """A progress line every 2 videos and at the end (absl's: on stderr whether or not it is
  a terminal, as in a pod's log); the summary eval.py prints names the report and the
  confusion matrix PNG."""
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  eval_dir = tmp_path / 'eval'
  status, [result] = evaluate(I3D_FLAGS + [
      '--dataset_dir=%s' % rgb_dir, '--checkpoint_path=%s' % prefix, '--eval_image_size=32',
      '--eval_frames=8', '--batch_size=1', '--log_every_n_batches=2',
      '--num_preprocessing_threads=1', '--eval_dir=%s' % eval_dir])
  assert status == 0
  progress = [r.getMessage() for r in absl_info.records
              if re.match(r'rgb: \d+/6 videos', r.getMessage())]
  assert [line.split(', ')[0] for line in progress] == [
      'rgb: 2/6 videos (33.3%)', 'rgb: 4/6 videos (66.7%)', 'rgb: 6/6 videos (100.0%)',
      'rgb: 6/6 videos (100.0%)']
  assert progress[0].endswith(' left') and progress[-1].endswith(' in all')
  assert 'videos/s' in progress[-1]
  printed = run.summary(result)
  assert 'report: %s' % (eval_dir / 'report-7.json') in printed
  assert 'confusion matrix: %s' % (eval_dir / 'confusion-7-rgb.png') in printed
  assert (eval_dir / 'confusion-7-rgb.png').stat().st_size > 1000


def _report(eval_dir):
  [path] = glob.glob(os.path.join(str(eval_dir), 'report-*.json'))
  with open(path) as handle:
    return json.load(handle)


@pytest.mark.slow
def test_eval_from_the_run_record_alone(tmp_path, tmp_path_factory, absl_info):
  """A run of the real trainer (I3D 4 x 32 x 32 at depth 0.125, none of them I3D's
  defaults) evaluated with --checkpoint_path, --dataset_split_name and --eval_dir alone:
  the network, width, data, clip and crop are the run's and the report says so; a flag
  given wins, named in one line when it differs from the run's. (LeNet's record:
  tests/evaluation/test_alerts.py.)"""
  i3d = trained_runs.i3d_run(tmp_path_factory)
  cases = {'record': [], 'given': ['--clip_frames=6', '--depth_multiplier=0.125']}
  logged = {}
  for name, args in cases.items():
    absl_info.clear()
    status, _ = evaluate(args + ['--checkpoint_path=%s' % i3d, '--dataset_split_name=test',
                                 '--eval_dir=%s' % (tmp_path / name)])
    assert status == 0, name
    logged[name] = [r.getMessage() for r in absl_info.records]
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

  def lines(name, text):
    return [line for line in logged[name] if text in line]

  [described] = lines('record', 'settings from the run\'s record')
  assert 'eval_image_size=32 (record: --train_image_size)' in described
  assert not lines('record', 'differ from the run')
  given = _report(tmp_path / 'given')
  assert given['sampling']['clip_frames'] == 6
  assert given['settings']['rgb']['clip_frames'] == {'value': 6, 'from': 'flag'}
  assert lines('given', 'differ from the run') == [
      'given flags differ from the run\'s record %s/flags.cfg: --clip_frames=6 (the run: '
      '--clip_frames=4)' % i3d]
  for name in cases:   # 2 steps at decay 0.999
    assert len(lines(name, 'cannot have settled')) == 1


@pytest.mark.slow
def test_a_moved_run_needs_its_dataset_dir(tmp_path, digits_dir, capsys):
  """A run whose records moved away: one error line naming --dataset_dir."""
  shutil.copytree(digits_dir, tmp_path / 'data')
  trained_runs.train(tmp_path / 'train', str(tmp_path / 'data'), **trained_runs.LENET_FLAGS)
  shutil.move(str(tmp_path / 'data'), str(tmp_path / 'moved'))
  capsys.readouterr()   # the training's own lines
  status, _ = evaluate(['--checkpoint_path=%s' % (tmp_path / 'train'),
                        '--dataset_split_name=test'])
  assert_one_error_line_printed(
      capsys, status, '--dataset_dir is needed: the run\'s record %s/flags.cfg names '
      '--dataset_dir=%s, which no longer exists' % (tmp_path / 'train', tmp_path / 'data'))
