"""`make demo` as a user runs it: demo.py drives the real tools one after the other.

demo.py's work (demos.video.run_demo) runs in this process on the command line read as
demo.py reads it, and so do the command lines of the stages that import TensorFlow, each
called as its entry's main calls it (tests/demos/demo_stages.py; `make demo` runs each in a
process of its own, and each entry's process has its own contract test). The first stage,
which imports no TensorFlow, runs as `make demo` runs every stage: a process, its output
in its log. demo.py itself is started once, by its contract test: bad settings, status 2
and one line.
"""

import os
import re
import subprocess
import sys

import pytest

from core.params import config_from_argv
from demos.video import DemoConfig, run_demo
from tests.demos import demo_stages

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _demo(out, capsys, monkeypatch, *flags):
  """Runs the demo as demo.py's main does, from the repository root; -> the summary's
  lines."""
  monkeypatch.chdir(ROOT)   # The stages' scripts and the recipe, as `make demo` finds them.
  config, _ = config_from_argv(DemoConfig, ['--output_dir=%s' % out] + list(flags))
  status = run_demo(config, run_stage=demo_stages.in_process_but('videos'))
  printed = capsys.readouterr()
  assert status == 0, printed.out[-3000:] + printed.err[-3000:]
  summary = printed.out.split('== demo summary ==')[1].strip().splitlines()
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
def test_the_video_demo_runs_every_stage_and_says_so(tmp_path, capsys, monkeypatch):
  """The reduced form: every stage's command line, on 8 videos a class (the fewest the demo
  takes) and 2 steps, which no check here needs more of (the full demo, which learns the
  motion: the heavy test below, `make demo`)."""
  summary = _demo(tmp_path / 'demo', capsys, monkeypatch, '--videos_per_class=8',
                  '--train_steps=2', '--min_accuracy=0')
  _, total = _held_out(summary[0], '0')
  assert total > 0
  assert os.path.exists(tmp_path / 'demo' / 'train' / 'model.ckpt-2.index')


@pytest.mark.heavy
def test_the_video_demo_learns_motion_and_says_so(tmp_path, capsys, monkeypatch):
  correct, total = _held_out(_demo(tmp_path / 'demo', capsys, monkeypatch)[0], '0.9')
  assert 10 * correct >= 9 * total   # counted: at least 90 %


def test_bad_settings_are_one_line(tmp_path):
  """demo.py's contract, in its own process: status 2 and one `error:` line."""
  result = subprocess.run([sys.executable, 'demo.py', '--min_accuracy=2',
                           '--output_dir=%s' % tmp_path], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      'error: --min_accuracy=2.0 must be in [0, 1]']
