"""Tests of training/doctor/verdicts.py: each rule on measurements written by hand."""

import pytest

from training.doctor import verdicts
from training.doctor.measure import FULL, INPUT, SYNTHETIC, Measurement


def _measurements(input_rate, synthetic, full_rate, failed=()):
  """Measurements with these rates; `failed` clone counts of the synthetic step ran out
  of memory."""
  rows = [Measurement(INPUT, None, input_rate, 1.0)]
  for count, rate in sorted(synthetic.items()):
    rows.append(Measurement(SYNTHETIC, count, rate, 1.0))
  for count in failed:
    rows.append(Measurement(SYNTHETIC, count, None, None, error='out of memory'))
  rows.append(Measurement(FULL, max(synthetic) if synthetic else 1, full_rate, 1.0))
  return rows


def test_a_slow_input_with_the_full_step_at_its_pace_is_input_bound():
  verdict = verdicts.decide(_measurements(100.0, {1: 400.0, 2: 700.0}, 98.0), 2)
  assert verdict.name == verdicts.INPUT_BOUND
  assert verdict.flags == ('--num_preprocessing_threads', '--num_readers')
  assert '100.0 examples/sec, 0.14x' in verdict.reason


def test_a_fast_input_and_scaling_clones_is_compute_bound():
  verdict = verdicts.decide(_measurements(5000.0, {1: 400.0, 2: 700.0}, 690.0), 2)
  assert verdict.name == verdicts.COMPUTE_BOUND
  assert '--num_clones' in verdict.flags


def test_clones_that_add_nothing_are_clone_overhead_and_name_the_fewest_that_do_as_well():
  verdict = verdicts.decide(_measurements(5000.0, {1: 400.0, 2: 420.0, 3: 380.0}, 370.0), 3)
  assert verdict.name == verdicts.CLONE_OVERHEAD
  assert verdict.flags == ('--num_clones',)
  assert '--num_clones=1:' in verdict.advice and '0.95x' in verdict.reason
  # 2 clones bring 1.5x, the third nothing: 2 is the advice.
  verdict = verdicts.decide(_measurements(5000.0, {1: 400.0, 2: 600.0, 3: 450.0}, 440.0), 3)
  assert verdict.name == verdicts.CLONE_OVERHEAD and '--num_clones=2:' in verdict.advice


def test_one_clone_is_never_clone_overhead():
  verdict = verdicts.decide(_measurements(5000.0, {1: 400.0}, 390.0), 1)
  assert verdict.name == verdicts.COMPUTE_BOUND


@pytest.mark.parametrize('input_rate, model_rate, expected', [
    (0.79 * 1000, 1000.0, verdicts.INPUT_BOUND),     # just below the 0.8 share
    (0.81 * 1000, 1000.0, verdicts.COMPUTE_BOUND),   # just above it
])
def test_the_input_share_is_the_documented_margin(input_rate, model_rate, expected):
  verdict = verdicts.decide(_measurements(input_rate, {1: model_rate}, input_rate), 1)
  assert verdict.name == expected


def test_a_full_step_well_above_the_input_rate_is_not_input_bound():
  """The input alone looked slow, but training outran it: the input measurement was not
  what limits training."""
  verdict = verdicts.decide(_measurements(100.0, {1: 1000.0}, 400.0), 1)
  assert verdict.name == verdicts.COMPUTE_BOUND


def test_out_of_memory_comes_first_and_names_the_batch_size():
  rows = _measurements(100.0, {1: 400.0}, None, failed=(2,))
  verdict = verdicts.decide(rows, 2)
  assert verdict.name == verdicts.MEMORY
  assert verdict.flags[0] == '--batch_size'
  assert 'model, synthetic data with 2 clone(s)' in verdict.reason


@pytest.mark.parametrize('clone_on_cpu, flags', [
    (False, ('--num_clones', '--clone_on_cpu')),
    (True, ('--num_clones',)),
])
def test_clones_sharing_a_device_are_clone_overhead_before_any_rate(clone_on_cpu, flags):
  shared = {'/job:localhost/replica:0/task:0/device:CPU:0': (0, 1)}
  verdict = verdicts.decide(_measurements(100.0, {1: 400.0, 2: 800.0}, 98.0), 2,
                            shared=shared, clone_on_cpu=clone_on_cpu, num_gpus=0)
  assert verdict.name == verdicts.CLONE_OVERHEAD
  assert verdict.flags == flags
  assert 'clones 0, 1 on /device:CPU:0' in verdict.reason


def _paired(input_rate, model_rounds, full_rounds, full_wait=0.03):
  """One clone's measurements with per-round rates: the model step on synthetic data and
  the full step, round i of each timed back to back."""
  median = lambda rates: sorted(rates)[len(rates) // 2]
  return [Measurement(INPUT, None, input_rate, 1.0),
          Measurement(SYNTHETIC, 1, median(model_rounds), 1.0, tuple(model_rounds)),
          Measurement(FULL, 1, median(full_rounds), 1.0, tuple(full_rounds),
                      input_wait_share=full_wait)]


def test_a_full_step_slowed_by_the_decode_beside_it_is_input_bound_though_it_never_waited():
  """One core: the pipeline keeps up alone (1.2x), the draws find batches ready (3 %),
  and yet the full step runs at half the model's pace in 4 of 5 rounds."""
  rows = _paired(24.0, [20.0, 21.0, 19.0, 20.0, 22.0], [10.0, 11.0, 15.0, 9.0, 10.0])
  verdict = verdicts.decide(rows, 1)
  assert verdict.name == verdicts.INPUT_BOUND
  assert 'in 4 of 5 rounds (median 0.50x)' in verdict.reason
  assert '--num_preprocessing_threads' in verdict.flags


@pytest.mark.parametrize('full_rounds', [
    [20.0, 21.0, 19.0, 20.0, 22.0],   # at the model's pace: compute-bound
    [10.0, 11.0, 19.0, 20.0, 22.0],   # slowed in 2 of 5 rounds only (a busy minute)
])
def test_a_full_step_slowed_in_at_most_half_the_rounds_is_not_input_bound(full_rounds):
  rows = _paired(24.0, [20.0, 21.0, 19.0, 20.0, 22.0], full_rounds)
  assert verdicts.decide(rows, 1).name == verdicts.COMPUTE_BOUND
