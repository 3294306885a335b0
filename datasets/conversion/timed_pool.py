"""A process pool where every task has a time limit, enforced by killing its worker.

A video decoder can hang inside C code, where no Python signal or timeout reaches it;
`multiprocessing.Pool` and `concurrent.futures` cannot stop one such task without
tearing down the whole pool. Here each worker is a process of its own: when a task runs
past `timeout` seconds its worker is killed, the task is reported as timed out, and a
fresh worker takes its place. A worker that dies inside a task (a decoder's segfault, the
kernel's OOM killer) is noticed at once through its process sentinel, its task reported as
failed with the signal or exit code, and it is replaced the same way.

Each worker talks to the parent over a pipe of its own, written synchronously. A shared
`multiprocessing.Queue` is not safe here: its writes go through a background thread
holding a lock shared by every worker, and a worker that dies before that thread lets go
(it replied, then died at the start of its next task) leaves the lock held; with one
shared queue the whole pool hung in about 1 run in 7 of the tests of a dying worker. A private pipe that breaks only ends its
own worker's channel, which the parent sees as end-of-file. Workers are started with
'spawn' so they never inherit the parent's TensorFlow threads. A spawned worker imports
the parent's main module again (as `__mp_main__`, without running its `__main__` block):
a tool that runs this pool keeps that module's imports free of TensorFlow, which cost
5.3 s per worker (datasets/convert_videos.py).
"""

import multiprocessing
from multiprocessing import connection
import signal
import time

__all__ = ['TaskTimeout', 'TaskFailed', 'run_tasks']


class TaskTimeout(Exception):
  """The task ran longer than the pool's timeout; its worker was killed."""


class TaskFailed(Exception):
  """The task raised in its worker (message: the exception's type and text)."""


def _worker(fn, channel):
  while True:
    try:
      item = channel.recv()
    except EOFError:  # The parent has gone.
      return
    if item is None:
      return
    index, argument = item
    try:
      reply = (index, True, fn(argument))
    except Exception as error:  # pylint: disable=broad-except
      # Reported to the parent, which decides; the worker goes on with the next task.
      reply = (index, False, '%s: %s' % (type(error).__name__, error))
    channel.send(reply)


class _Slot:
  """One worker process, its private pipe and the task it is running."""

  def __init__(self, context, fn):
    self.spawn_arguments = (context, fn)
    self.channel, child_end = context.Pipe(duplex=True)
    self.process = context.Process(target=_worker, args=(fn, child_end), daemon=True)
    self.process.start()
    child_end.close()  # Only the child holds it now, so its death reads as end-of-file.
    self.index = None
    self.started = None

  def give(self, index, argument):
    self.index, self.started = index, time.monotonic()
    self.channel.send((index, argument))

  def receive(self):
    """The running task's (ok, value), or None when the worker died before replying."""
    try:
      index, ok, value = self.channel.recv()
    except (EOFError, OSError):
      return None
    assert index == self.index, (index, self.index)
    return ok, value

  def stop(self, kill=False):
    if kill:
      self.process.kill()
    else:
      try:
        self.channel.send(None)
      except OSError:  # Already dead: its end of the pipe is closed.
        pass
    self.process.join(timeout=5)
    if self.process.is_alive():
      self.process.kill()
      self.process.join()
    self.channel.close()

  def replace(self):
    """Stops this worker (killing it) and returns a fresh one."""
    self.stop(kill=True)
    return _Slot(*self.spawn_arguments)


def run_tasks(fn, arguments, num_processes=2, timeout=None):
  """Runs fn(argument) for each argument in worker processes; yields as they finish.

  Args:
    fn: a picklable top-level function of one argument.
    arguments: a list of picklable arguments.
    num_processes: worker processes (at least 1).
    timeout: seconds one task may take (None: unlimited).

  Yields:
    (index into arguments, result), where result is fn's return value, or a TaskFailed
    or TaskTimeout instance. Every argument is yielded exactly once.
  """
  context = multiprocessing.get_context('spawn')
  pending = list(enumerate(arguments))[::-1]
  slots = [_Slot(context, fn) for _ in range(max(1, min(num_processes, len(pending))))]
  try:
    for slot in slots:
      if pending:
        slot.give(*pending.pop())
    remaining = len(arguments)
    while remaining:
      for position, index, result in _next_results(slots, timeout):
        remaining -= 1
        yield index, result
        if pending:
          slots[position].give(*pending.pop())
  finally:
    for slot in slots:
      slot.stop(kill=slot.index is not None)


def _next_results(slots, timeout):
  """Waits until a busy worker replies, dies or runs out of time.

  Returns a list of (slot position, task index, result); a worker that died or timed out
  has been replaced by a fresh one at its position.
  """
  busy = [position for position, slot in enumerate(slots) if slot.index is not None]
  wait_for = None
  if timeout is not None:
    now = time.monotonic()
    wait_for = max(0.0, min(slots[p].started + timeout for p in busy) - now)
  waitables = {}
  for position in busy:
    waitables[slots[position].channel] = position
    waitables[slots[position].process.sentinel] = position
  ready = {waitables[w] for w in connection.wait(list(waitables), timeout=wait_for)}
  finished = []
  for position in busy:
    slot = slots[position]
    index = slot.index
    if position in ready:
      # A reply sent just before the worker died is still read: poll first.
      reply = slot.receive() if slot.channel.poll() else None
      if reply is not None:
        slot.index = None
        ok, value = reply
        finished.append((position, index, value if ok else TaskFailed(value)))
        continue
      if slot.process.is_alive():
        continue  # Its pipe closed before it was reaped; the sentinel wakes us again.
      code = slot.process.exitcode
      slots[position] = slot.replace()
      failure = TaskFailed('worker process died (%s)' % _describe_exit(code))
      finished.append((position, index, failure))
    elif timeout is not None and time.monotonic() - slot.started > timeout:
      slots[position] = slot.replace()
      finished.append((position, index,
                       TaskTimeout('no result after %.0f s; worker stopped' % timeout)))
  return finished


def _describe_exit(code):
  if code is not None and code < 0:
    try:
      return 'killed by %s' % signal.Signals(-code).name
    except ValueError:
      return 'killed by signal %d' % -code
  return 'exit code %s' % code
