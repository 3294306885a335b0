"""benchmarks.capacity's arithmetic against sums done by hand (the measurement itself is
the benchmark's run, `python -m benchmarks.capacity`, recorded in docs/cluster.md)."""

import pytest

from benchmarks import capacity
from core.errors import ConfigError

MB = 1e6


@pytest.mark.parametrize('workers, gbps, expected', [
    # I3D, 49.1 MB each way per worker step, T = 1.3 s: a 1 Gb/s link moves
    # 125 MB/s x 1.3 s = 162.5 MB within T; 10 x 49.1 = 491 MB -> 3.02 -> 4 ps tasks.
    (10, 1.0, 4),
    (10, 10.0, 1),             # 1625 MB within T: one task.
    (100, 10.0, 4),            # 4910 / 1625 = 3.02 -> 4.
    (25, 1.0, 'variable'),     # 25 x 7.96 MB = 199 MB > 162.5 MB on the task holding it.
])
def test_ps_tasks_needed(workers, gbps, expected):
  assert capacity.ps_needed(49.1 * MB, 7.96 * MB, workers, gbps, 1.3) == expected


def test_a_link_too_slow_for_one_worker_is_named():
  # 13 MB in 0.05 s at 1 Gb/s: the link moves 6.25 MB.
  assert capacity.ps_needed(13 * MB, 12.8 * MB, 1, 1.0, 0.05) == 'link'


def test_the_busier_direction_shares_the_wire_bytes_as_the_payload():
  record = dict(payload_in_mb=30.0, payload_out_mb=10.0, wire_mb_per_step=44.0)
  assert capacity.busier_way(record) == pytest.approx(33.0 * MB)


@pytest.mark.parametrize('changes, flag', [
    (dict(step_secs=('i3d:fast',)), '--step_secs=i3d:fast'),
    (dict(step_secs=('i3d:0',)), '--step_secs=i3d:0'),
    (dict(steps=2), '--steps=2'),
])
def test_settings_that_measure_nothing_are_refused(changes, flag):
  with pytest.raises(ConfigError, match=flag):
    capacity.check_settings(capacity.CapacitySettings(**changes))
