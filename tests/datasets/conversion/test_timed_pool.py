"""timed_pool: every task reported once, failures and hangs isolated to their task."""

import os
import signal
import time

from datasets.conversion.timed_pool import TaskFailed, TaskTimeout, run_tasks


def square_or_misbehave(value):
  if value == 'raise':
    raise RuntimeError('bad input')
  if value == 'hang':
    time.sleep(600)
  return value * value


def test_results_failures_and_timeouts_each_reported_once():
  arguments = [1, 2, 'raise', 3, 'hang', 4]
  start = time.monotonic()
  results = dict(run_tasks(square_or_misbehave, arguments, num_processes=2, timeout=3))
  assert time.monotonic() - start < 60
  assert sorted(results) == list(range(len(arguments)))
  assert [results[i] for i in (0, 1, 3, 5)] == [1, 4, 9, 16]
  assert isinstance(results[2], TaskFailed) and 'RuntimeError: bad input' in str(results[2])
  assert isinstance(results[4], TaskTimeout)


def test_empty_and_single_worker():
  assert not list(run_tasks(square_or_misbehave, [], num_processes=2))
  assert dict(run_tasks(square_or_misbehave, [5, 6], num_processes=1)) == {0: 25, 1: 36}


def die_on(value):
  if value == 'segfault':
    os.kill(os.getpid(), signal.SIGSEGV)
  if value == 'exit':
    os._exit(7)  # pylint: disable=protected-access
  return value * 2


def test_a_worker_that_dies_fails_its_task_at_once_without_a_timeout():
  """No timeout set: a dead worker must still be noticed, not waited for forever."""
  start = time.monotonic()
  results = dict(run_tasks(die_on, [1, 'segfault', 2, 'exit', 3], num_processes=2))
  assert time.monotonic() - start < 60
  assert [results[i] for i in (0, 2, 4)] == [2, 4, 6]
  assert isinstance(results[1], TaskFailed) and 'killed by SIGSEGV' in str(results[1])
  assert isinstance(results[3], TaskFailed) and 'exit code 7' in str(results[3])



def test_workers_dying_right_after_a_reply_never_stall_the_others():
  """A regression: with one result queue shared by all workers, a worker killed just after
  its reply was written, before its writer thread let go of the queue's lock, left that
  lock held; every other worker then blocked on its next reply and the pool hung."""
  arguments = [1, 'segfault', 2, 'exit'] * 10
  start = time.monotonic()
  results = dict(run_tasks(die_on, arguments, num_processes=2))
  assert time.monotonic() - start < 120
  assert [results[i] for i in range(0, len(arguments), 4)] == [2] * 10
  assert all(isinstance(results[i], TaskFailed) for i in range(1, len(arguments), 2))
