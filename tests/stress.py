"""Runs the cluster tests again and again on a deliberately loaded CPU; counts failures.

    python -m tests.stress                       # every group, 30 runs each
    python -m tests.stress --runs=10 --groups=sync_equivalence --load=2
    make stress

A real cluster never gives friendly timings; a 2-core machine with nothing else running
does. Here `--load` busy processes (default: one per core) spin beside every run, so the
tasks of a cluster are descheduled at arbitrary points, as on a busy host. Each run is
one pytest process selecting tests by marker and name (`-m cluster -k ...`) among the
test files that define such names, so the harness keeps working when tests move between
files. Groups run in turn within each
round, so a slow machine state hurts every group alike.

After every run the harness checks that nothing outlived it: each pytest gets a marker in
its environment, which every process it starts inherits (cluster tasks run in sessions
of their own, so a process group would miss them); any process still carrying the marker
(a task the test failed to kill, and with it its port) is counted as a leak, printed and
killed.

Logs go to --log_dir (absl's flag, reused; default runs/stress), one per run, kept for
failed runs. Prints one line per run, then a table: runs, failures and leaks per group.
Run from the repository root. Exit status 0 when no run failed or leaked, 1 otherwise; 2
for bad flags (one `error:` line).
"""

import collections
import dataclasses
import datetime
import multiprocessing
import os
import platform
import re
import signal
import subprocess
import sys
import time

from absl import app, flags

from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> pytest -k expression (within -m cluster).
GROUPS = collections.OrderedDict([
    ('sync_equivalence', 'two_sync_workers_of_batch_b_update_like_one_worker_of_batch_2b'),
    ('chief_kill', 'replaces_a_chief_lost_inside_an_update'),
    ('ps_kill', 'lost_parameter_server_ends_every_worker'),
    ('end_of_job', 'end_of_training_ends_every_task'),
])


@dataclasses.dataclass(frozen=True)
class StressSettings:
  """How often and under how much load the groups run; `check_settings` holds the rules."""
  runs: int = param(30, 'Runs of each group.')
  groups: tuple[str, ...] = param(tuple(GROUPS), 'Groups to run, from: %s.'
                                  % ', '.join(GROUPS))
  load: int = param(os.cpu_count() or 1, 'Busy processes beside every run (default: one per '
                    'core).')
  timeout_secs: float = param(600.0, 'A run still going after this counts as failed.')
  # --log_dir (one pytest log per run; failed runs are kept) is absl.logging's own flag,
  # reused as launch_local does; main() reads it, default LOG_DIR.


define_flags(StressSettings)
FLAGS = flags.FLAGS
LOG_DIR = os.path.join(ROOT, 'runs', 'stress')


def _spin():
  while True:
    pass


def _start_load(count):
  processes = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
  for process in processes:
    process.start()
  return processes


MARKER = 'SLIMDEPLOY_STRESS_RUN'
LINGER_SECS = 5.0


def _marked_processes(value):
  """PIDs of the processes whose environment holds MARKER=value."""
  wanted = ('%s=%s' % (MARKER, value)).encode()
  pids = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit():
      continue
    try:
      with open('/proc/%s/environ' % entry, 'rb') as environ:
        if wanted in environ.read().split(b'\0'):
          pids.append(int(entry))
    except OSError:
      continue
  return pids


def _describe(pid):
  try:
    with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
      return cmdline.read().replace(b'\0', b' ').decode(errors='replace')[:160]
  except OSError:
    return '?'


def test_files(expression):
  """The test files defining a test whose name holds one of the expression's words (so
  pytest collects 1 or 2 files, not the whole tree: 20 s saved per run on a loaded
  2-core machine, and still found wherever the tests move)."""
  words = [word.strip() for word in expression.split(' or ')]
  found = []
  for directory, _, names in os.walk(os.path.join(ROOT, 'tests')):
    for name in sorted(names):
      if name.startswith('test_') and name.endswith('.py'):
        path = os.path.join(directory, name)
        with open(path) as source:
          tests = re.findall(r'^def (test_\w+)', source.read(), re.MULTILINE)
        if any(word in test for test in tests for word in words):
          found.append(os.path.relpath(path, ROOT))
  return sorted(found)


def run_once(expression, timeout_secs, log_path):
  """-> (passed, leaked pids' descriptions, seconds)."""
  command = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
             *test_files(expression), '-m', 'cluster', '-k', expression]
  start = time.time()
  marker = '%d-%d' % (os.getpid(), time.monotonic_ns())
  with open(log_path, 'w') as log:
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, env=dict(os.environ, **{MARKER: marker}))
    try:
      status = process.wait(timeout_secs)
    except subprocess.TimeoutExpired:
      status = None
  seconds = time.time() - start
  if status is None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
  deadline = time.time() + LINGER_SECS  # A task signalled at the end may still be exiting.
  leaked = _marked_processes(marker)
  while leaked and time.time() < deadline:
    time.sleep(0.2)
    leaked = _marked_processes(marker)
  descriptions = [_describe(pid) for pid in leaked]
  for pid in leaked:
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
  return status == 0, descriptions, seconds


def check_settings(settings):
  """-> the group names to run; ConfigError names the flag and what would be accepted."""
  if settings.runs < 1 or settings.load < 0:
    raise errors.ConfigError('--runs=%d --load=%d are not accepted: use --runs >= 1 and '
                             '--load >= 0' % (settings.runs, settings.load))
  names = [name for name in settings.groups if name]
  unknown = [name for name in names if name not in GROUPS]
  if unknown or not names:
    raise errors.ConfigError('--groups=%s is not accepted: name some of %s'
                             % (','.join(settings.groups), ', '.join(GROUPS)))
  empty = [name for name in names if not test_files(GROUPS[name])]
  if empty:
    raise errors.ConfigError('no test matches group(s) %s: update GROUPS in %s' % (
        ', '.join(empty), os.path.relpath(__file__, ROOT)))
  return names


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  settings = config_from_flags(StressSettings, FLAGS)
  try:
    names = check_settings(settings)
  except errors.ConfigError as error:
    return errors.report(error)
  return stress(settings, names, FLAGS.log_dir or LOG_DIR)


def stress(settings, names, log_dir):
  """Runs each group settings.runs times beside settings.load busy processes, one pytest log
  per run in `log_dir`; prints one line per run and the table. -> 0 when no run failed or
  leaked, else 1."""
  os.makedirs(log_dir, exist_ok=True)
  commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
  print('stress: %s, commit %s, %d cores, load %d busy process(es), %d run(s) of %s'
        % (datetime.date.today(), commit, os.cpu_count(), settings.load, settings.runs,
           ', '.join(names)), flush=True)
  print('machine: %s %s, Python %s' % (platform.system(), platform.machine(),
                                       platform.python_version()), flush=True)
  failures, leaks, seconds = (collections.Counter() for _ in range(3))
  load = _start_load(settings.load)
  try:
    for run in range(1, settings.runs + 1):
      for name in names:
        log_path = os.path.join(log_dir, '%s-%03d.log' % (name, run))
        passed, leaked, took = run_once(GROUPS[name], settings.timeout_secs, log_path)
        failures[name] += not passed
        leaks[name] += bool(leaked)
        seconds[name] += took
        print('run %3d  %-17s %s  %5.1f s%s' % (
            run, name, 'pass' if passed else 'FAIL (%s)' % log_path, took,
            ''.join('\n  leaked: %s' % d for d in leaked)), flush=True)
        if passed and not leaked:
          os.remove(log_path)
  finally:
    for process in load:
      process.kill()
  print('\n%-17s %5s %8s %6s %9s' % ('group', 'runs', 'failures', 'leaks', 'mean s'))
  for name in names:
    print('%-17s %5d %8d %6d %9.1f' % (name, settings.runs, failures[name], leaks[name],
                                        seconds[name] / settings.runs))
  return 1 if sum(failures.values()) + sum(leaks.values()) else 0


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
