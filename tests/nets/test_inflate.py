"""`python -m nets.inflate` as users run it: the checkpoint it writes, its exit statuses.

The inflation itself is tested in tests/nets/test_inflation.py; the 2-D checkpoint is
tests/nets/conftest.py's `checkpoint_2d`. The command lines run in this process as the
tool's main runs them (tests/entries.py); the tool itself is started once, for an
output that cannot be written (its status and its one line).
"""

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from core import errors
from nets import inflation
from nets.inflation import InflateConfig
from tests import entries
from tests.video_testdata import write_checkpoint
from tf_compat import tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _call(*flags):
  return entries.call(InflateConfig, flags, inflation.inflate_checkpoint)


@pytest.mark.slow  # a 12.7M-parameter write
def test_cli_writes_the_checkpoint_with_the_imagenet_logits(checkpoint_2d, tmp_path, capsys):
  status, written = _call(f'--checkpoint_2d={checkpoint_2d[0]}',
                          f'--output={tmp_path}/i3d.ckpt', '--num_classes=1001')
  assert status == errors.OK, capsys.readouterr().err
  print(inflation.summary_line(written))   # what main prints
  assert capsys.readouterr().out == (f'wrote {tmp_path}/i3d.ckpt: 58 kernels inflated, '
                                     '172 other variables copied\n')
  assert sorted(glob.glob(f'{tmp_path}/*')) == [f'{tmp_path}/i3d.ckpt.data-00000-of-00001',
                                               f'{tmp_path}/i3d.ckpt.index']
  reader = tf.train.NewCheckpointReader(f'{tmp_path}/i3d.ckpt')
  for name in ('weights', 'biases'):
    got = reader.get_tensor(f'InceptionV1/Logits/Conv3d_0c_1x1/{name}')
    want = checkpoint_2d[1][f'InceptionV1/Logits/Conv2d_0c_1x1/{name}']
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_cli_bad_checkpoint_is_one_error_line_and_status_2(tmp_path, capsys):
  source = write_checkpoint(str(tmp_path / 'v2.ckpt'), {
      'InceptionV2/Conv2d_1a_7x7/weights': np.zeros([7, 7, 3, 64], np.float32)})
  status, _ = _call(f'--checkpoint_2d={source}', f'--output={tmp_path}/out/i3d.ckpt')
  printed = capsys.readouterr()
  assert status == errors.USAGE
  assert printed.err.startswith(f'error: --checkpoint_2d={source} is not a 2-D '
                                'Inception-v1 checkpoint')
  assert printed.err.count('\n') == 1 and printed.out == ''
  assert not (tmp_path / 'out').exists()


def test_cli_unwritable_output_exits_6(checkpoint_2d, tmp_path):
  """The tool's contract, in its own process: status and one `error:` line."""
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  result = subprocess.run([sys.executable, '-m', 'nets.inflate',
                           f'--checkpoint_2d={checkpoint_2d[0]}', f'--output={blocker}/i3d.ckpt'],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 6, result.stderr  # IO in core/errors.py's table
  assert result.stderr.startswith('error: writing the I3D checkpoint failed: ')
  assert result.stderr.count('\n') == 1 and result.stdout == ''


def test_cli_extra_arguments_exit_2(checkpoint_2d, tmp_path, capsys):
  status, _ = _call(f'--checkpoint_2d={checkpoint_2d[0]}', f'--output={tmp_path}/x', 'extra')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]
