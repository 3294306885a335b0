"""The converters' progress: a bar on a terminal, plain lines in a log.

On a terminal, tqdm's bar (videos done, frames/s, ETA). When stderr is not a terminal (a
Kubernetes pod's log, CI, `2> file`), a line every `every` videos and at the end:

    converting: 1340/13320 videos (10%), 812 frames/s, 2 skipped, 14m51s left
"""

import sys
import time

from core.durations import duration

__all__ = ['Progress']

_LINES_PER_RUN = 20  # about one line every 5 % of the videos


class Progress:
  """Counts converted (and skipped) videos; `update` after each, `close` at the end."""

  def __init__(self, total, enabled=True, stream=None, every=None, clock=time.monotonic):
    self._total, self._done, self._frames, self._skipped = total, 0, 0, 0
    self._stream = stream or sys.stderr
    self._clock = clock
    self._start = clock()
    self._bar = None
    self._every = None
    if not (enabled and total):
      return
    if self._stream.isatty():
      from tqdm import tqdm  # pylint: disable=import-outside-toplevel
      self._bar = tqdm(total=total, unit='video', file=self._stream, dynamic_ncols=True)
    else:
      self._every = every or max(1, total // _LINES_PER_RUN)

  def update(self, frames, skipped=False):
    """One more video done: `frames` written (0 if it was skipped)."""
    self._done += 1
    self._frames += frames
    self._skipped += bool(skipped)
    if self._bar is not None:
      self._bar.set_postfix_str('%.0f frames/s' % self._rate(), refresh=False)
      self._bar.update(1)
    elif self._every and (self._done % self._every == 0 or self._done == self._total):
      self._line()

  def _rate(self):
    return self._frames / max(1e-9, self._clock() - self._start)

  def _line(self):
    elapsed = self._clock() - self._start
    left = elapsed / self._done * (self._total - self._done)
    print('converting: %d/%d videos (%d%%), %.0f frames/s, %d skipped, %s' % (
        self._done, self._total, 100 * self._done // self._total, self._rate(),
        self._skipped, '%s left' % duration(left)
        if self._done < self._total else 'done in %s' % duration(elapsed)), file=self._stream, flush=True)

  def close(self):
    if self._bar is not None:
      self._bar.close()
