"""`python -m datasets.make_synthetic_videos` as users run it: what it prints, exit statuses."""

import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*flags):
  return subprocess.run([sys.executable, '-m', 'datasets.make_synthetic_videos', *flags],
                        cwd=_ROOT, capture_output=True, text=True, timeout=60, check=False)


def test_command_line(tmp_path):
  flags = ['--num_classes=2', '--videos_per_class=4', '--max_frames=10',
           '--sizes=32x48,48x64']
  done = _run('--output_dir=%s' % (tmp_path / 'out'), *flags)
  assert done.returncode == 0, done.stderr
  assert done.stdout.startswith('wrote 4 train and 4 test videos of 2 classes')
  bad = _run('--output_dir=%s' % (tmp_path / 'other'), '--sizes=32by48')
  assert bad.returncode == 2
  assert bad.stderr.strip() == 'error: --sizes=32by48 is not accepted: use HEIGHTxWIDTH pairs ' \
                               'like 64x80,72x96'
  again = _run('--output_dir=%s' % (tmp_path / 'out'), *flags)
  assert again.returncode == 2
  assert again.stderr.strip().splitlines() == [
      'error: output_dir=%s already holds videos/; remove it or choose another directory'
      % (tmp_path / 'out')]


def test_an_output_that_cannot_be_written_exits_6_and_extra_arguments_2(tmp_path):
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  result = _run('--output_dir=%s' % (blocker / 'out'), '--num_classes=2',
                '--videos_per_class=4', '--max_frames=8')
  assert result.returncode == 6, result.stderr  # IO in core/errors.py's table
  assert result.stderr.startswith('error: writing into %s failed: ' % (blocker / 'out'))
  assert len(result.stderr.strip().splitlines()) == 1
  extra = _run('--output_dir=%s' % (tmp_path / 'out'), 'extra')
  assert extra.returncode == 2
  assert extra.stderr.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]
