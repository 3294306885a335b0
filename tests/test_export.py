"""export.py as users run it: version 1 of a model TF Serving loads (a SavedModel with
labels.txt and model_info.json in assets.extra/), or one `error:` line."""

import concurrent.futures
import json
import os

import pytest

from tests import video_testdata as vt
from tests.test_eval_cli import assert_one_error_line
from tests.test_eval_cli import run as run_script


@pytest.mark.slow
def test_export_writes_a_saved_model_or_one_error_line(tmp_path, tmp_path_factory):
  flow_dir = vt.converted(tmp_path_factory, 'flow')
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'flow')
  common = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
            '--dataset_dir=%s' % flow_dir, '--eval_image_size=32', '--eval_frames=10']
  model_dir = str(tmp_path / 'model')
  cases = {
      'good': ['--checkpoint_path=%s' % os.path.dirname(prefix), '--export_dir=%s' % model_dir],
      'missing': ['--checkpoint_path=%s' % (tmp_path / 'none'),
                  '--export_dir=%s' % (tmp_path / 'other')],
  }
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results = {name: pool.submit(run_script, 'export.py', common + args)
               for name, args in cases.items()}
  results = {name: future.result() for name, future in results.items()}
  good = results['good']
  assert good.returncode == 0, good.stderr
  # 10 frames fill I3D's logits pool in time, so frames stay dynamic; the crop is fixed.
  assert good.stdout == (
      'exported %s to %s (input [None, None, 32, 32, 2]); serve it with: '
      'tensorflow_model_server --model_base_path=%s --model_name=model\n' % (
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
  assert_one_error_line(results['missing'], '--checkpoint_path=', 'no such checkpoint')
