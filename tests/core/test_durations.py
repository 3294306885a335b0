"""core.durations: the one duration format of every progress line."""

import pytest

from core.durations import duration


@pytest.mark.parametrize('seconds,text', [
    (0, '0.0s'), (4.24, '4.2s'), (9.94, '9.9s'), (9.96, '10s'), (59.4, '59s'),
    (59.6, '1m00s'), (830, '13m50s'), (3599.4, '59m59s'), (3600, '1h00m'),
    (7500, '2h05m'), (999960, '277h46m'),
])
def test_a_duration_is_short_and_as_precise_as_it_is_worth(seconds, text):
  assert duration(seconds) == text
