"""A test that overruns its time-out fails by its name; it never hangs the suite.

pytest-timeout's `signal` method (pytest.ini) fails the test in its own worker, which goes
on with the next test: the time-out is raised in Python, so a step of a session that runs
on returns first. A test stuck where Python never runs again (a session.run waiting
forever) is ended by the watchdog below, `crash_grace` seconds after its time-out: every
thread's stack is printed and the worker exits. pytest-xdist's file scheduling would then
queue the whole unfinished file again, the stuck test first, on the replacement worker: a
time-out after time-out, or, when the other workers had already been told to stop, a
session that waits forever (seen on 2026-11-28). `WorkerCrashes` reports the test the
worker died in as failed, the tests left in its file as not run, and sends the worker's
other files to the replacement.

tests/test_worker_crashes.py runs the reproduction: a test past its time-out, a test stuck
with the time-out's signal blocked and a test that kills its own worker, each followed by
more tests of its file, under `-n 3 --dist loadfile`.
"""

import faulthandler
import sys

import pytest

DEFAULT_CRASH_GRACE = 120.0  # seconds after an item's time-out


def add_options(parser):
  parser.addini('crash_grace', 'Seconds after a test\'s time-out before a watchdog ends a '
                'worker stuck where the time-out cannot be raised (tests/worker_crashes.py).',
                default=str(DEFAULT_CRASH_GRACE))


def item_timeout(item):
  """The item's pytest-timeout seconds (its `timeout` mark, else the ini's); 0 = none."""
  marker = item.get_closest_marker('timeout')
  if marker is not None:
    value = marker.args[0] if marker.args else marker.kwargs.get('timeout')
  else:
    value = item.config.getini('timeout')
  return float(value or 0)


class Watchdog:
  """In each worker: a test still running `crash_grace` after its time-out is ended with
  every thread's stack printed (faulthandler's C thread: it needs no Python to run)."""

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_protocol(self, item):
    timeout = item_timeout(item)
    if timeout > 0:
      faulthandler.dump_traceback_later(
          timeout + float(item.config.getini('crash_grace')), exit=True, file=sys.__stderr__)
    try:
      yield
    finally:
      if timeout > 0:
        faulthandler.cancel_dump_traceback_later()


class WorkerCrashes:
  """In the controller: a worker that died is reported, and its file is not queued again."""

  @pytest.hookimpl(optionalhook=True, tryfirst=True)
  def pytest_testnodedown(self, node, error):
    if error is None:
      return
    sched = node.config.pluginmanager.getplugin('dsession').sched
    workload = getattr(sched, 'assigned_work', {}).get(node)  # --dist loadfile/loadscope
    if not workload:
      return
    crashed_scope = next((scope for scope, unit in workload.items()
                          if not all(unit.values())), None)
    if crashed_scope is None:
      return
    unit = workload[crashed_scope]
    left = [nodeid for nodeid, done in unit.items() if not done]
    for nodeid in unit:  # Nothing of this file is queued again (xdist would: all of it).
      unit[nodeid] = True
    for scope in [s for s in workload if s != crashed_scope and not all(workload[s].values())]:
      sched.workqueue[scope] = workload.pop(scope)  # Not started: the replacement runs them.
    worker = node.gateway.id
    self._report(node, left[0], 'failed', 'worker %r ended while running %s (its watchdog '
                 'after the time-out, a signal or a crash; its stack is above)' %
                 (worker, left[0]))
    for nodeid in left[1:]:
      self._report(node, nodeid, 'skipped', 'not run: worker %r ended in %s, earlier in '
                   'this file' % (worker, left[0]))

  @staticmethod
  def _report(node, nodeid, outcome, message):
    path = nodeid.split('::')[0]
    report = pytest.TestReport(
        nodeid=nodeid, location=(path, None, nodeid), keywords={}, outcome=outcome,
        # A skip's (path, line, reason) named by the test: the summary folds equal ones.
        longrepr=message if outcome == 'failed' else (nodeid, None, message),
        when='call')
    report.node = node
    node.config.hook.pytest_runtest_logreport(report=report)
