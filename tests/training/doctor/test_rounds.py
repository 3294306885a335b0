"""training/doctor/rounds.py: the alternating rounds every timing runs in (the doctor's
components, every benchmark's measures)."""

import pytest

from training.doctor import rounds


def test_every_measure_runs_once_per_round_in_turn_and_the_warm_up_round_is_dropped():
  calls = []
  found = rounds.alternate({'a': lambda index: calls.append(('a', index)) or index * 10,
                            'b': lambda index: calls.append(('b', index)) or index},
                           2, after_round=lambda index, values: calls.append(values))
  assert calls == [('a', 0), ('b', 0), {'a': 0, 'b': 0}, ('a', 1), ('b', 1),
                   {'a': 10, 'b': 1}, ('a', 2), ('b', 2), {'a': 20, 'b': 2}]
  assert found.samples == {'a': [10, 20], 'b': [1, 2]} and found.failed == {}


def test_flip_reverses_odd_rounds_and_none_is_not_recorded():
  order = []
  measures = {name: (lambda index, name=name: order.append(name) or (index or None))
              for name in ('one', 'two', 'jobs')}
  found = rounds.alternate(measures, 2, flip=True)
  assert order == ['one', 'two', 'jobs', 'jobs', 'two', 'one', 'one', 'two', 'jobs']
  assert found.samples == {'one': [1, 2], 'two': [1, 2], 'jobs': [1, 2]}


def test_a_tolerated_error_ends_only_its_measure_and_another_propagates():
  def fails_in_round_one(index):
    if index == 1:
      raise MemoryError('too big')
    return 1.0
  found = rounds.alternate({'big': fails_in_round_one, 'small': lambda index: 2.0}, 3,
                           tolerate=(MemoryError,))
  assert found.samples == {'big': [], 'small': [2.0, 2.0, 2.0]}
  assert isinstance(found.failed['big'], MemoryError)
  with pytest.raises(ValueError):
    rounds.alternate({'bad': lambda index: int('x')}, 1, tolerate=(MemoryError,))


def test_rates_and_the_median_of_per_round_ratios():
  calls = []
  rate = rounds.per_second(lambda: calls.append(1), 4, units_per_call=8, warmup_calls=2)
  assert len(calls) == 6 and rate > 0
  # Per round: 2.0, 0.5, 3.0 -> median 2.0 (the ratio of medians would be 1.5).
  assert rounds.median_ratio([4, 1, 9], [2, 2, 3]) == (2.0, [2.0, 0.5, 3.0])
