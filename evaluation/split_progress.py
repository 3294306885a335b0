"""How far an evaluation is through its split, as log lines a user (or a pod's log) reads.

    progress = SplitProgress('rgb', total=3783, unit='videos', batch_size=1)
    for each batch: progress.add(batch size)
    progress.finish()

logs, every N batches and once at the end (through absl logging, so on stderr whether or
not it is a terminal, and in a log file when logging goes to one):

    rgb: 380/3783 videos (10.0%), 4.1 videos/s, 13m50s left
    rgb: 3783/3783 videos (100.0%), 4.0 videos/s, 15m46s in all

The rate is over the time since the progress began (the first batch's start-up included).
"""

import math
import time

from absl import logging

from core.durations import duration

__all__ = ['SplitProgress', 'expected_examples', 'LINES_PER_SPLIT']

LINES_PER_SPLIT = 20   # without --log_every_n_batches: a line about every 5%


def expected_examples(num_samples, batch_size, max_num_batches):
  """Examples an evaluation reads: the split's, or fewer with --max_num_batches."""
  if max_num_batches is None:
    return num_samples
  return min(num_samples, batch_size * max_num_batches)


class SplitProgress:
  """Counts examples as batches finish and logs a line every `every_n_batches` batches.

  Args:
    name: what is evaluated, first on the line ('rgb', 'image', ...).
    total: examples expected (`expected_examples`).
    unit: 'videos' or 'images'.
    batch_size: examples per batch, to place a line about every 5% when `every_n_batches`
      is None.
    every_n_batches: log every N batches; None = about LINES_PER_SPLIT lines per split.
    clock: seconds, monotonic (tests pass their own).
  """

  def __init__(self, name, total, unit, batch_size, every_n_batches=None,
               clock=time.monotonic):
    if every_n_batches is None:
      batches = math.ceil(max(total, 1) / batch_size)
      every_n_batches = max(1, math.ceil(batches / LINES_PER_SPLIT))
    self.name, self.total, self.unit = name, total, unit
    self.every_n_batches = every_n_batches
    self._clock = clock
    self._start = clock()
    self.done = 0
    self.batches = 0
    self._logged_at = 0

  def line(self, final=False):
    """The progress line for what is done now."""
    elapsed = max(self._clock() - self._start, 1e-9)
    rate = self.done / elapsed
    percent = 100.0 * self.done / self.total if self.total else 100.0
    if final:
      when = '%s in all' % duration(elapsed)
    elif rate > 0:
      when = '%s left' % duration(max(self.total - self.done, 0) / rate)
    else:
      when = 'time left unknown'
    return '%s: %d/%d %s (%.1f%%), %.1f %s/s, %s' % (
        self.name, self.done, self.total, self.unit, percent, rate, self.unit, when)

  def add(self, examples):
    """One more batch of `examples` done; logs when it is the Nth since the last line."""
    self.done += int(examples)
    self.batches += 1
    if self.batches - self._logged_at >= self.every_n_batches:
      self._logged_at = self.batches
      logging.info('%s', self.line())

  def finish(self):
    """Logs the closing line (always, also right after a periodic one)."""
    logging.info('%s', self.line(final=True))
