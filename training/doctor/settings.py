"""The doctor's own flags: how long to time and where to write. Everything else it reads
from the trainer's flags (`TrainConfig`), so it runs with the flagfile of a training."""

import dataclasses
from typing import Optional

from core.errors import require
from core.params import param

__all__ = ['DoctorSettings', 'check_settings']


@dataclasses.dataclass(frozen=True)
class DoctorSettings:
  """What `python -m training.doctor` adds to the training flags."""
  # Doctor output.
  doctor_dir: Optional[str] = param(
      None, 'Where the doctor writes doctor.txt (the table), doctor.json and doctor.png '
      '(throughput against clones); unset = <train_dir>/doctor.')
  # Doctor timing.
  doctor_rounds: int = param(
      3, 'Rounds; each times every component in turn, and a component\'s figure is its '
      'median over the rounds.')
  doctor_steps: int = param(
      10, 'Timed steps of each component per round (batches for the input pipeline '
      'alone).')
  doctor_warmup_steps: int = param(
      5, 'Untimed steps of each component, in a round of their own before the timed '
      'rounds (caches, shuffle buffers, thread pools).')


def check_settings(settings):
  """Returns `settings` if they are usable; a ConfigError names the flag otherwise."""
  require(settings.doctor_rounds >= 1, '--doctor_rounds=%d must be >= 1'
          % settings.doctor_rounds)
  require(settings.doctor_steps >= 1, '--doctor_steps=%d must be >= 1'
          % settings.doctor_steps)
  require(settings.doctor_warmup_steps >= 0, '--doctor_warmup_steps=%d must be >= 0'
          % settings.doctor_warmup_steps)
  return settings
