"""`make demo` as a user runs it: demo.py drives the real tools one after the other."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _demo(out, *flags):
  """Runs demo.py as a user does; -> the summary's lines."""
  result = subprocess.run([sys.executable, 'demo.py', '--output_dir=%s' % out] + list(flags),
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  summary = result.stdout.split('== demo summary ==')[1].strip().splitlines()
  assert summary[1].startswith('prediction on held-out v_') and 'true class' in summary[1]
  assert summary[2].startswith('time per stage: videos ')
  assert summary[4] == 'open them with: tensorboard --logdir=%s' % out
  for stage in ('videos', 'convert', 'train', 'eval', 'export', 'predict'):
    assert os.path.exists(out / 'logs' / ('%s.log' % stage))
  assert os.path.exists(out / 'model' / '1' / 'saved_model.pb')
  return summary


def _held_out(summary_line, target):
  match = re.match(r'test accuracy: \d\.\d{4} \((\d+)/(\d+) held-out videos; target %s\)$'
                   % re.escape(target), summary_line)
  assert match, summary_line
  return int(match.group(1)), int(match.group(2))


@pytest.mark.slow
def test_the_video_demo_runs_every_stage_and_says_so(tmp_path):
  """The reduced form: every stage's real command line, on 8 videos a class and 20 steps
  (the full demo, which learns the motion: the heavy test below, `make demo`)."""
  summary = _demo(tmp_path / 'demo', '--videos_per_class=8', '--train_steps=20',
                  '--min_accuracy=0')
  _, total = _held_out(summary[0], '0')
  assert total > 0
  assert os.path.exists(tmp_path / 'demo' / 'train' / 'model.ckpt-20.index')


@pytest.mark.heavy
def test_the_video_demo_learns_motion_and_says_so(tmp_path):
  correct, total = _held_out(_demo(tmp_path / 'demo')[0], '0.9')
  assert 10 * correct >= 9 * total   # counted: at least 90 %


def test_bad_settings_are_one_line(tmp_path):
  result = subprocess.run([sys.executable, 'demo.py', '--min_accuracy=2',
                           '--output_dir=%s' % tmp_path], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      'error: --min_accuracy=2.0 must be in [0, 1]']
