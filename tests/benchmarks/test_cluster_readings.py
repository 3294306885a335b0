"""benchmarks/cluster_readings.py: the chief's timeline across midnight, the window after
warm-up, and a task's CPU seconds between two moments, interpolated between samples."""

import types

import pytest

from benchmarks import cluster_readings as readings

CHIEF_LOG = '\n'.join([
    'I1128 23:59:58.500000 1 progress.py:1] step 10 of 40: loss = 2.3 (100.0 examples/sec',
    'I1128 23:59:59.500000 1 progress.py:1] step 20 of 40: loss = 2.2 (100.0 examples/sec',
    'I1129 00:00:00.500000 1 progress.py:1] step 30 of 40: loss = 2.1 (100.0 examples/sec',
    'I1129 00:00:01.500000 1 progress.py:1] step 40 of 40: loss = 2.0 (100.0 examples/sec',
])


def test_the_timeline_goes_on_past_midnight():
  assert readings.chief_timeline(CHIEF_LOG) == [
      (86398.5, 10), (86399.5, 20), (86400.5, 30), (86401.5, 40)]


def test_the_window_starts_at_the_first_line_after_warm_up():
  assert readings.job_window(CHIEF_LOG, warmup_steps=20) == ((86399.5, 20), (86401.5, 40))
  with pytest.raises(RuntimeError, match='too few progress lines'):
    readings.job_window(CHIEF_LOG, warmup_steps=40)


def test_worker_rates_are_read_from_the_lines():
  assert readings.WORKER_RATE.findall(CHIEF_LOG)[0] == ('10', '100.0')


def test_cpu_between_two_moments_is_interpolated_between_samples():
  sampler = readings.CpuSampler(types.SimpleNamespace(tasks=[]))
  # pylint: disable=protected-access
  sampler._samples = [(10.0, {'worker-0': 1.0}), (12.0, {'worker-0': 3.0})]
  assert sampler.between('worker-0', 10.5, 11.5) == pytest.approx(1.0)
  assert sampler.between('worker-0', 9.0, 13.0) == pytest.approx(2.0)   # Held at the ends.


def test_cpu_seconds_of_the_machine_and_of_this_process_grow():
  assert readings.busy_cpu_secs() > 0 and readings.own_cpu_secs() > 0
