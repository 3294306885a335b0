"""`python -m nets.inflate` as users run it: the checkpoint it writes, its exit statuses.

The inflation itself is tested in tests/nets/test_inflation.py; the 2-D checkpoint is
tests/nets/conftest.py's `checkpoint_2d`.
"""

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.video_testdata import write_checkpoint
from tf_compat import tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_cli(*flags):
  return subprocess.run([sys.executable, '-m', 'nets.inflate', *flags], cwd=REPO,
                        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow  # a whole TensorFlow start-up and a 12.7M-parameter write
def test_cli_writes_the_checkpoint_with_the_imagenet_logits(checkpoint_2d, tmp_path):
  result = _run_cli(f'--checkpoint_2d={checkpoint_2d[0]}',
                    f'--output={tmp_path}/i3d.ckpt', '--num_classes=1001')
  assert result.returncode == 0, result.stderr
  assert result.stdout == (f'wrote {tmp_path}/i3d.ckpt: 58 kernels inflated, '
                           '172 other variables copied\n')
  assert sorted(glob.glob(f'{tmp_path}/*')) == [f'{tmp_path}/i3d.ckpt.data-00000-of-00001',
                                               f'{tmp_path}/i3d.ckpt.index']
  reader = tf.train.NewCheckpointReader(f'{tmp_path}/i3d.ckpt')
  for name in ('weights', 'biases'):
    got = reader.get_tensor(f'InceptionV1/Logits/Conv3d_0c_1x1/{name}')
    want = checkpoint_2d[1][f'InceptionV1/Logits/Conv2d_0c_1x1/{name}']
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_cli_bad_checkpoint_is_one_error_line_and_status_2(tmp_path):
  source = write_checkpoint(str(tmp_path / 'v2.ckpt'), {
      'InceptionV2/Conv2d_1a_7x7/weights': np.zeros([7, 7, 3, 64], np.float32)})
  result = _run_cli(f'--checkpoint_2d={source}', f'--output={tmp_path}/out/i3d.ckpt')
  assert result.returncode == 2
  assert result.stderr.startswith(f'error: --checkpoint_2d={source} is not a 2-D '
                                  'Inception-v1 checkpoint')
  assert result.stderr.count('\n') == 1 and result.stdout == ''
  assert not (tmp_path / 'out').exists()


def test_cli_unwritable_output_exits_6_and_extra_arguments_2(checkpoint_2d, tmp_path):
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  result = _run_cli(f'--checkpoint_2d={checkpoint_2d[0]}', f'--output={blocker}/i3d.ckpt')
  assert result.returncode == 6, result.stderr  # IO in core/errors.py's table
  assert result.stderr.startswith('error: writing the I3D checkpoint failed: ')
  assert result.stderr.count('\n') == 1 and result.stdout == ''
  extra = _run_cli(f'--checkpoint_2d={checkpoint_2d[0]}', f'--output={tmp_path}/x', 'extra')
  assert extra.returncode == 2
  assert extra.stderr.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]
