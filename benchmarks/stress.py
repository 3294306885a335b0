"""Runs the cluster tests again and again on a deliberately loaded CPU; counts failures.

    python benchmarks/stress.py                       # every group, 30 runs each
    python benchmarks/stress.py --runs=10 --groups=sync_equivalence --load=2
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

Prints one line per run, then a table: runs, failures and leaks per group. Exit status
0 when no run failed or leaked, 1 otherwise.
"""

import argparse
import collections
import datetime
import multiprocessing
import os
import platform
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> pytest -k expression (within -m cluster).
GROUPS = collections.OrderedDict([
    ('sync_equivalence', 'two_sync_workers_of_batch_b_update_like_one_worker_of_batch_2b'),
    ('chief_kill', 'chief_killed_and_restarted or chief_lost_inside_a_synchronous_update'),
    ('ps_kill', 'parameter_server_killed'),
    ('end_of_job', 'end_of_training_ends_every_task'),
])


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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runs', type=int, default=30, help='Runs of each group.')
  parser.add_argument('--groups', default=','.join(GROUPS),
                      help='Comma-separated, from: %s.' % ', '.join(GROUPS))
  parser.add_argument('--load', type=int, default=os.cpu_count(),
                      help='Busy processes beside every run (default: one per core).')
  parser.add_argument('--timeout_secs', type=float, default=600,
                      help='A run still going after this counts as failed.')
  parser.add_argument('--log_dir', default=os.path.join(ROOT, 'runs', 'stress'),
                      help='One pytest log per run; failed runs are kept.')
  args = parser.parse_args(argv)
  names = [name for name in args.groups.split(',') if name]
  unknown = [name for name in names if name not in GROUPS]
  if unknown or args.runs < 1 or args.load < 0:
    parser.error('--groups must name some of %s (got %s); --runs >= 1, --load >= 0'
                 % (', '.join(GROUPS), ', '.join(unknown) or args.groups))
  empty = [name for name in names if not test_files(GROUPS[name])]
  if empty:
    parser.error('no test matches group(s) %s: update GROUPS in %s' % (
        ', '.join(empty), os.path.relpath(__file__, ROOT)))
  os.makedirs(args.log_dir, exist_ok=True)
  commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
  print('stress: %s, commit %s, %d cores, load %d busy process(es), %d run(s) of %s'
        % (datetime.date.today(), commit, os.cpu_count(), args.load, args.runs,
           ', '.join(names)), flush=True)
  print('machine: %s %s, Python %s' % (platform.system(), platform.machine(),
                                       platform.python_version()), flush=True)
  failures, leaks, seconds = (collections.Counter() for _ in range(3))
  load = _start_load(args.load)
  try:
    for run in range(1, args.runs + 1):
      for name in names:
        log_path = os.path.join(args.log_dir, '%s-%03d.log' % (name, run))
        passed, leaked, took = run_once(GROUPS[name], args.timeout_secs, log_path)
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
    print('%-17s %5d %8d %6d %9.1f' % (name, args.runs, failures[name], leaks[name],
                                        seconds[name] / args.runs))
  return 1 if sum(failures.values()) + sum(leaks.values()) else 0


if __name__ == '__main__':
  sys.exit(main())
