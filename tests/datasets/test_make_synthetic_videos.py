"""`python -m datasets.make_synthetic_videos` as users run it: what it prints, exit statuses.

The command lines run in this process as the tool's main runs them (tests/entries.py);
the tool itself is started once (it imports no TensorFlow): an output that cannot be
written, its status and its one line.
"""

import os
import subprocess
import sys

from core import errors
from datasets.synthetic import make_synthetic_videos
from datasets.synthetic.make_synthetic_videos import SyntheticVideosConfig
from tests import entries

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _call(*flags):
  return entries.call(SyntheticVideosConfig, flags,
                         make_synthetic_videos.write_synthetic_videos)


def test_command_line(tmp_path, capsys):
  flags = ['--num_classes=2', '--videos_per_class=4', '--max_frames=10',
           '--sizes=32x48,48x64']
  status, summary = _call('--output_dir=%s' % (tmp_path / 'out'), *flags)
  assert status == errors.OK, capsys.readouterr().err
  assert make_synthetic_videos.summary_line(summary).startswith(   # what main prints
      'wrote 4 train and 4 test videos of 2 classes')
  status, _ = _call('--output_dir=%s' % (tmp_path / 'other'), '--sizes=32by48')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip() == (
      'error: --sizes=32by48 is not accepted: use HEIGHTxWIDTH pairs like 64x80,72x96')
  status, _ = _call('--output_dir=%s' % (tmp_path / 'out'), *flags)
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      'error: output_dir=%s already holds videos/; remove it or choose another directory'
      % (tmp_path / 'out')]


def test_an_output_that_cannot_be_written_exits_6(tmp_path):
  """The tool's contract, in its own process: status and one `error:` line."""
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  result = subprocess.run([sys.executable, '-m', 'datasets.make_synthetic_videos',
                           '--output_dir=%s' % (blocker / 'out'), '--num_classes=2',
                           '--videos_per_class=4', '--max_frames=8'],
                          cwd=_ROOT, capture_output=True, text=True, timeout=60, check=False)
  assert result.returncode == 6, result.stderr  # IO in core/errors.py's table
  assert result.stderr.startswith('error: writing into %s failed: ' % (blocker / 'out'))
  assert len(result.stderr.strip().splitlines()) == 1


def test_extra_arguments_exit_2(tmp_path, capsys):
  status, _ = _call('--output_dir=%s' % (tmp_path / 'out'), 'extra')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]
