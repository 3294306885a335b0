"""`Cadence`: when the loop saves a checkpoint or the step fetches the summaries.

Every `steps` global steps (each time the global step crosses a multiple of it) or once
`secs` seconds have passed since the last time, whichever comes first; 0 turns each off.
A time-based write does not shift the multiples: with steps=10, a write at step 13 (time
up) is followed by one at step 20. The clock is monotonic, so a wall-clock change moves
nothing.
"""

import time

__all__ = ['Cadence']


class Cadence:
  """Decides, from the global step and the clock, whether the next write is due."""

  def __init__(self, steps=0, secs=0.0, clock=time.monotonic):
    self.steps = int(steps)
    self.secs = float(secs)
    self._clock = clock
    self._step = None
    self._time = None

  @property
  def enabled(self):
    return bool(self.steps or self.secs)

  def start(self, step):
    """The session began at global `step`: both counts start there."""
    self._step, self._time = int(step), self._clock()

  def due(self, step):
    """Whether a write at global `step` is due (False before `start`)."""
    if self._step is None:
      return False
    if self.steps and step // self.steps > self._step // self.steps:
      return True
    return bool(self.secs) and self._clock() - self._time >= self.secs

  def done(self, step):
    """A write happened at global `step`, now."""
    self.start(step)
