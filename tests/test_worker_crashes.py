"""The suite's time-out settings end a run in seconds, naming the test, whatever the test
does past its time-out (tests/worker_crashes.py).

Reproduction of 2026-11-28's hang, kept: under `-n 3 --dist loadfile` with pytest-timeout's
thread method, a test past its time-out ended its worker and pytest-xdist queued its whole
file again on the replacement, the test first: here 13 crashes of one 2-second test before
xdist's limit of restarts (12 x 600 s in the suite, past CI's 90 minutes), on the Intel
host a session that waited forever. With pytest.ini's settings the same files end at
once.

Its processes are the point (a pytest controller and its workers), and none of them
imports TensorFlow (test_d_fine checks it in a worker): the inner run's conftest takes
only the suite's two hooks, whose module (tests/worker_crashes.py) imports pytest and the
standard library.
"""

import configparser
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each file's first test goes wrong in its own way; the tests after it show what happens to
# the rest of its file. d and e keep the other workers busy with files of their own.
FILES = {
    'test_a_sleeps.py': """
        import time
        def test_past_its_timeout():
          time.sleep(30)
        def test_after_it():
          pass
        """,
    'test_b_stuck.py': """
        import signal, time
        def test_stuck_where_no_signal_reaches_python():
          signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
          time.sleep(30)
        def test_second():
          pass
        def test_third():
          pass
        """,
    'test_c_killed.py': """
        import os, signal
        def test_kills_its_worker():
          os.kill(os.getpid(), signal.SIGKILL)
        def test_after_it():
          pass
        """,
    'test_d_fine.py': """
        import sys
        def test_one():
          pass
        def test_two():  # The inner run's workers start without TensorFlow.
          assert 'tensorflow' not in sys.modules
        """,
    'test_e_fine.py': 'def test_one():\n  pass\n',
}


def _suite_ini(path):
  """pytest.ini of the repository with a 2-second time-out and a 3-second grace."""
  ini = configparser.ConfigParser(interpolation=None)
  ini.read(os.path.join(ROOT, 'pytest.ini'))
  ini['pytest'].update(timeout='2', crash_grace='3', testpaths='.')
  with open(path, 'w') as stream:
    ini.write(stream)


def test_a_stuck_or_dying_test_fails_by_its_name_and_the_run_ends(tmp_path):
  for name, text in FILES.items():
    (tmp_path / name).write_text(textwrap.dedent(text))
  # The suite's own hooks, not a copy (tests/conftest.py without its fixtures).
  (tmp_path / 'conftest.py').write_text(
      'from tests.conftest import pytest_addoption, pytest_configure\n')
  _suite_ini(tmp_path / 'pytest.ini')
  run = subprocess.run(
      [sys.executable, '-m', 'pytest', '-n', '3', '--dist', 'loadfile', '-p',
       'no:cacheprovider', '-rA', '--no-header'], cwd=tmp_path, capture_output=True,
      text=True, timeout=180, env=dict(os.environ, PYTHONPATH=ROOT), check=False)
  lines = run.stdout.splitlines()
  outcomes = {}
  for line in lines:
    for outcome in ('PASSED', 'FAILED', 'SKIPPED'):
      if line.startswith(outcome + ' '):
        name = line.split()[1]
        if outcome == 'SKIPPED':  # 'SKIPPED [1] test_x.py::test_y: reason'
          name = line.split()[2].rstrip(':')
        outcomes.setdefault(name, []).append(outcome)
  assert run.returncode == 1, run.stdout[-3000:]
  assert outcomes == {
      'test_a_sleeps.py::test_past_its_timeout': ['FAILED'],
      'test_a_sleeps.py::test_after_it': ['PASSED'],
      'test_b_stuck.py::test_stuck_where_no_signal_reaches_python': ['FAILED'],
      'test_b_stuck.py::test_second': ['SKIPPED'],
      'test_b_stuck.py::test_third': ['SKIPPED'],
      'test_c_killed.py::test_kills_its_worker': ['FAILED'],
      'test_c_killed.py::test_after_it': ['SKIPPED'],
      'test_d_fine.py::test_one': ['PASSED'],
      'test_d_fine.py::test_two': ['PASSED'],
      'test_e_fine.py::test_one': ['PASSED'],
  }, run.stdout[-3000:]
  assert 'Timeout (>2.0s)' in run.stdout
  # The stuck test's stack, printed by the watchdog before it ended the worker.
  assert 'test_stuck_where_no_signal_reaches_python' in run.stderr + run.stdout
  assert "not run: worker 'gw" in run.stdout
