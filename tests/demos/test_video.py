"""`make demo` as a user runs it: demo.py drives the real tools one after the other."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_video_demo_learns_motion_and_says_so(tmp_path):
  out = tmp_path / 'demo'
  result = subprocess.run([sys.executable, 'demo.py', '--output_dir=%s' % out], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  summary = result.stdout.split('== demo summary ==')[1].strip().splitlines()
  match = re.match(r'test accuracy: \d\.\d{4} \((\d+)/(\d+) held-out videos; target 0.9\)$',
                   summary[0])
  correct, total = int(match.group(1)), int(match.group(2))
  assert 10 * correct >= 9 * total, summary   # counted: at least 90 %
  assert summary[1].startswith('prediction on held-out v_') and 'true class' in summary[1]
  assert summary[2].startswith('time per stage: videos ')
  assert summary[4] == 'open them with: tensorboard --logdir=%s' % out
  for stage in ('videos', 'convert', 'train', 'eval', 'export', 'predict'):
    assert os.path.exists(out / 'logs' / ('%s.log' % stage))
  assert os.path.exists(out / 'model' / '1' / 'saved_model.pb')


def test_bad_settings_are_one_line(tmp_path):
  result = subprocess.run([sys.executable, 'demo.py', '--min_accuracy=2',
                           '--output_dir=%s' % tmp_path], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      'error: --min_accuracy=2.0 must be in [0, 1]']
