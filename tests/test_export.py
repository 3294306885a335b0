"""export.py as users run it: a SavedModel with labels.txt and model_info.json, or one
`error:` line."""

import concurrent.futures
import json
import os

import pytest

from tests import video_testdata as vt
from tests.test_eval_cli import assert_one_error_line
from tests.test_eval_cli import run as run_script


@pytest.mark.slow
def test_export_writes_a_saved_model_or_one_error_line(tmp_path, tmp_path_factory):
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  prefix, _, _ = vt.random_i3d_checkpoint(str(tmp_path / 'train' / 'model.ckpt-4'), 3,
                                          global_step=4)
  common = ['--model_name=i3d', '--depth_multiplier=%g' % vt.DEPTH,
            '--dataset_dir=%s' % rgb_dir, '--eval_image_size=32', '--eval_frames=10']
  model_dir = str(tmp_path / 'model')
  cases = {
      'good': ['--checkpoint_path=%s' % os.path.dirname(prefix), '--export_dir=%s' % model_dir],
      'missing': ['--checkpoint_path=%s' % (tmp_path / 'none'),
                  '--export_dir=%s' % (tmp_path / 'other')],
      'exists': ['--checkpoint_path=%s' % prefix, '--export_dir=%s' % tmp_path],
  }
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results = {name: pool.submit(run_script, 'export.py', common + args)
               for name, args in cases.items()}
  results = {name: future.result() for name, future in results.items()}
  good = results['good']
  assert good.returncode == 0, good.stderr
  # 10 frames fill I3D's logits pool in time, so frames stay dynamic; the crop is fixed.
  assert good.stdout.strip() == 'exported %s to %s (input [None, None, 32, 32, 3])' % (
      prefix, model_dir)
  assert sorted(os.listdir(model_dir)) == ['labels.txt', 'model_info.json',
                                           'saved_model.pb', 'variables']
  with open(os.path.join(model_dir, 'model_info.json')) as handle:
    info = json.load(handle)
  assert info['sampling'] == {'mode': 'eval_frames', 'frames': 10, 'crop_size': 32}
  assert (info['global_step'], info['moving_averages']) == (4, False)
  assert_one_error_line(results['missing'], '--checkpoint_path=', 'no such checkpoint')
  assert_one_error_line(results['exists'], '--export_dir=%s already exists' % tmp_path)
