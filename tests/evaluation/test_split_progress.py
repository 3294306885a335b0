"""evaluation.split_progress: the lines a user follows an evaluation by, with a clock of our
own."""

import logging

import pytest

from evaluation.split_progress import SplitProgress, expected_examples


class Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def _lines(caplog):
  return [record.getMessage() for record in caplog.records]


@pytest.fixture
def caplog_info(caplog):
  caplog.set_level(logging.INFO, logger='absl')
  return caplog


def test_a_line_every_n_batches_and_at_the_end(caplog_info):
  clock = Clock()
  progress = SplitProgress('rgb', total=10, unit='videos', batch_size=2, every_n_batches=2,
                           clock=clock)
  for _ in range(5):
    clock.now += 1.0
    progress.add(2)
  progress.finish()
  assert _lines(caplog_info) == [
      'rgb: 4/10 videos (40.0%), 2.0 videos/s, 3.0s left',
      'rgb: 8/10 videos (80.0%), 2.0 videos/s, 1.0s left',
      'rgb: 10/10 videos (100.0%), 2.0 videos/s, 5.0s in all']


def test_unset_every_n_gives_about_twenty_lines(caplog_info):
  clock = Clock()
  progress = SplitProgress('image', total=3783, unit='images', batch_size=1, clock=clock)
  assert progress.every_n_batches == 190
  for _ in range(3783):
    clock.now += 0.25
    progress.add(1)
  progress.finish()
  lines = _lines(caplog_info)
  assert len(lines) == 19 + 1
  assert lines[0] == 'image: 190/3783 images (5.0%), 4.0 images/s, 14m58s left'
  assert lines[-1] == 'image: 3783/3783 images (100.0%), 4.0 images/s, 15m46s in all'


def test_a_short_split_logs_each_batch():
  assert SplitProgress('x', total=7, unit='videos', batch_size=4).every_n_batches == 1


def test_hours_and_a_rate_not_known_yet():
  clock = Clock()
  progress = SplitProgress('rgb', total=100000, unit='videos', batch_size=1, clock=clock)
  assert progress.line().endswith('0.0 videos/s, time left unknown')
  clock.now += 10.0
  progress.add(1)
  assert progress.line().endswith('0.1 videos/s, 277h46m left')


@pytest.mark.parametrize('num_samples,batch,max_batches,expected', [
    (360, 100, None, 360), (360, 100, 2, 200), (360, 100, 9, 360)])
def test_expected_examples(num_samples, batch, max_batches, expected):
  assert expected_examples(num_samples, batch, max_batches) == expected
