"""timed_pool: every task reported once, failures and hangs isolated to their task."""

import time

from datasets.timed_pool import TaskFailed, TaskTimeout, run_tasks


def square_or_misbehave(value):
  if value == 'raise':
    raise RuntimeError('bad input')
  if value == 'hang':
    time.sleep(600)
  return value * value


def test_results_failures_and_timeouts_each_reported_once():
  arguments = [1, 2, 'raise', 3, 'hang', 4]
  start = time.monotonic()
  results = dict(run_tasks(square_or_misbehave, arguments, num_workers=2, timeout=3))
  assert time.monotonic() - start < 60
  assert sorted(results) == list(range(len(arguments)))
  assert [results[i] for i in (0, 1, 3, 5)] == [1, 4, 9, 16]
  assert isinstance(results[2], TaskFailed) and 'RuntimeError: bad input' in str(results[2])
  assert isinstance(results[4], TaskTimeout)


def test_empty_and_single_worker():
  assert not list(run_tasks(square_or_misbehave, [], num_workers=2))
  assert dict(run_tasks(square_or_misbehave, [5, 6], num_workers=1)) == {0: 25, 1: 36}
