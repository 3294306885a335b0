"""export.py's path in the test's own process (tests/entries.py `export`: the command line
read as export.py reads it, from_run_record, export_saved_model): version 1 of a model TF
Serving loads (a SavedModel with labels.txt and model_info.json in assets.extra/) and the
line export.py prints, or one `error:` line; the export of a run of the real trainer from
its record alone. One contract test starts export.py in a fresh process."""

import json
import logging
import os

import pytest

from tests import trained_runs
from tests import video_testdata as vt
from tests.entries import (assert_one_error_line, assert_one_error_line_printed, export,
                           run_entry)


@pytest.mark.slow
def test_export_writes_a_saved_model_or_one_error_line(tmp_path, tmp_path_factory, capsys):
  flow_dir = vt.converted(tmp_path_factory, 'flow')
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'flow')
  common = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
            '--dataset_dir=%s' % flow_dir, '--eval_image_size=32', '--eval_frames=10']
  model_dir = str(tmp_path / 'model')
  status, result = export(common + ['--checkpoint_path=%s' % os.path.dirname(prefix),
                                    '--export_dir=%s' % model_dir])
  assert status == 0
  # 10 frames fill I3D's logits pool in time, so frames stay dynamic; the crop is fixed.
  assert result.summary() == (
      'exported %s to %s (input [None, None, 32, 32, 2]); serve it with: '
      'tensorflow_model_server --model_base_path=%s --model_name=model' % (
          prefix, os.path.join(model_dir, '1'), model_dir))
  assert os.listdir(model_dir) == ['1']
  assert sorted(os.listdir(os.path.join(model_dir, '1'))) == ['assets.extra', 'saved_model.pb',
                                                             'variables']
  assert sorted(os.listdir(os.path.join(model_dir, '1', 'assets.extra'))) == [
      'labels.txt', 'model_info.json']
  with open(os.path.join(model_dir, '1', 'assets.extra', 'model_info.json')) as handle:
    info = json.load(handle)
  assert info['sampling'] == {'mode': 'eval_frames', 'frames': 10, 'crop_size': 32}
  assert (info['modality'], info['channels'], info['global_step'],
          info['moving_averages']) == ('flow', 2, 9, False)
  capsys.readouterr()
  status, result = export(common + ['--checkpoint_path=%s' % (tmp_path / 'none'),
                                    '--export_dir=%s' % (tmp_path / 'other')])
  assert result is None and not os.path.exists(tmp_path / 'other')
  assert_one_error_line_printed(capsys, status, '--checkpoint_path=', 'no such checkpoint')


def test_a_mistyped_run_dir_is_the_first_and_only_error(tmp_path):
  """export.py's contract, in a fresh process: `export.py --checkpoint_path=TYPO` alone
  gives the checkpoint's line, not --export_dir's or --model_name's, and status 2."""
  (tmp_path / 'ucf101_rgb_s1').mkdir()
  typo = str(tmp_path / 'ucf101_rgb_s2')
  assert_one_error_line(run_entry(['export.py', '--checkpoint_path=%s' % typo]),
                        'error: --checkpoint_path=%s: no such checkpoint, file or directory '
                        '(similar: %s); give a training directory' % (
                            typo, tmp_path / 'ucf101_rgb_s1'))


@pytest.mark.slow
def test_export_from_the_run_record_alone(tmp_path, tmp_path_factory, caplog):
  """A run of the real trainer exported with --checkpoint_path and --export_dir alone:
  the network, width, records, clip and crop are the run's (model_info.json says where
  each came from); a flag given wins, named in one line when it differs."""
  caplog.set_level(logging.INFO, logger='absl')
  i3d = trained_runs.i3d_run(tmp_path_factory)
  cases = {'record': [], 'given': ['--eval_image_size=40', '--model_name=i3d']}
  info, differ = {}, {}
  for name, args in cases.items():
    caplog.clear()
    status, _ = export(args + ['--checkpoint_path=%s' % i3d,
                               '--export_dir=%s' % (tmp_path / name)])
    assert status == 0, name
    differ[name] = [r.getMessage() for r in caplog.records
                    if 'differ from the run' in r.getMessage()]
    with open(str(tmp_path / name / '1' / 'assets.extra' / 'model_info.json')) as handle:
      info[name] = json.load(handle)
  record = info['record']
  assert (record['model_name'], record['net_kwargs'], record['modality']) == (
      'i3d', {'depth_multiplier': vt.DEPTH}, 'rgb')
  assert record['sampling'] == {'mode': 'eval_clips', 'clips': 1, 'clip_frames': 4,
                                'crop_size': 32}
  assert record['settings']['record'] == os.path.join(i3d, 'flags.cfg')
  assert {name: entry['from'] for name, entry in record['settings'].items()
          if name != 'record'} == {'model_name': 'record', 'depth_multiplier': 'record',
                                   'dataset_dir': 'record', 'eval_image_size': 'record',
                                   'clip_frames': 'record'}
  assert record['input_shape'][2:] == [32, 32, 3]
  given = info['given']
  assert given['sampling']['crop_size'] == 40 and given['input_shape'][2:] == [40, 40, 3]
  assert given['settings']['eval_image_size'] == {'value': 40, 'from': 'flag'}
  assert differ['given'] == ['given flags differ from the run\'s record %s/flags.cfg: '
                             '--eval_image_size=40 (the run: --train_image_size=32)' % i3d]
