"""Alternating rounds: the one timing harness of the doctor and of every benchmark.

A shared machine's speed moves by 15 % and more within a minute, so nothing is timed
after something else: every measure runs once per round, in turn, round 0 is a warm-up
whose values are dropped (caches, thread pools, a graph's first run), and a figure is the
median over the timed rounds; a ratio is the median of the per-round ratios, each pair
measured side by side. `training/doctor/measure.py` runs its `Component`s (graphs with a
session each) through `alternate`; a benchmark whose measure is no session (a pool of
processes, a cluster, a converter) passes its own callables. No TensorFlow here: the
input benchmark's spawned processes import what imports this.
"""

import dataclasses
import statistics
import time

from core import heap

__all__ = ['Rounds', 'alternate', 'seconds_per_call', 'per_second', 'median_ratio']


@dataclasses.dataclass
class Rounds:
  """What `alternate` measured: {name: [value of each timed round]} and {name: the
  exception that ended it} for a measure that raised a tolerated error (its values until
  then are kept)."""
  samples: dict
  failed: dict


def alternate(measures, rounds, *, flip=False, tolerate=(), after_round=None):
  """Runs every measure once per round, in turn: the warm-up round 0, then `rounds`.

  Args:
    measures: {name: fn(round_index) -> value}, in the order they run; a value of None
      is not recorded (a measure with nothing to do in the warm-up round).
    rounds: timed rounds after the warm-up.
    flip: odd rounds run the measures in reverse order, so no measure always runs
      right after the same other one.
    tolerate: exception types that end a measure: kept in `failed`, it is left out of
      the later rounds. Any other exception propagates.
    after_round: fn(round_index, {name: value} of that round, in run order), or None.

  Returns:
    Rounds.
  """
  found = Rounds({name: [] for name in measures}, {})
  for round_index in range(rounds + 1):
    names = list(measures)[::-1] if flip and round_index % 2 else list(measures)
    values = {}
    for name in names:
      if name in found.failed:
        continue
      try:
        values[name] = measures[name](round_index)
      except tolerate as error:  # pylint: disable=catching-non-exception
        found.failed[name] = error
        continue
      if round_index and values[name] is not None:
        found.samples[name].append(values[name])
    if after_round is not None:
      after_round(round_index, values)
  return found


def seconds_per_call(fn, calls):
  """Mean seconds of `fn()` over `calls` calls in a row, with the heap frozen as the
  trainer's step loop freezes it (core.heap)."""
  with heap.frozen():
    start = time.perf_counter()
    for _ in range(calls):
      fn()
    return (time.perf_counter() - start) / calls


def per_second(fn, calls, units_per_call, warmup_calls=0):
  """Units per second of `fn()` (each call makes `units_per_call`: a batch's examples),
  timed over `calls` calls after `warmup_calls` untimed ones."""
  for _ in range(warmup_calls):
    fn()
  return units_per_call / seconds_per_call(fn, calls)


def median_ratio(numerator, denominator):
  """(median, [per-round ratios]) of numerator[i] / denominator[i], rounded to 3 places:
  each round's two values were measured side by side."""
  values = [n / d for n, d in zip(numerator, denominator)]
  return round(statistics.median(values), 3), [round(r, 3) for r in values]
