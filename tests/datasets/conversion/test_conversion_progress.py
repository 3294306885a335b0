"""Tests of datasets/conversion/conversion_progress.py: lines in a log when stderr is no
terminal."""

import io

from datasets.conversion.conversion_progress import Progress


class Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_a_log_gets_a_line_every_n_videos_and_at_the_end():
  stream, clock = io.StringIO(), Clock()
  progress = Progress(5, stream=stream, every=2, clock=clock)
  for frames in (10, 0, 30, 20, 40):
    clock.now += 1.0
    progress.update(frames, skipped=frames == 0)
  progress.close()
  assert stream.getvalue().splitlines() == [
      'converting: 2/5 videos (40%), 5 frames/s, 1 skipped, 3.0s left',
      'converting: 4/5 videos (80%), 15 frames/s, 1 skipped, 1.0s left',
      'converting: 5/5 videos (100%), 20 frames/s, 1 skipped, done in 5.0s']


def test_about_twenty_lines_by_default_and_none_when_disabled():
  stream = io.StringIO()
  progress = Progress(1000, stream=stream)
  for _ in range(1000):
    progress.update(1)
  assert len(stream.getvalue().splitlines()) == 20
  quiet = io.StringIO()
  progress = Progress(10, enabled=False, stream=quiet)
  progress.update(1)
  assert quiet.getvalue() == ''
