"""What the tests start ends with them: guards for the processes they start, and the check
after the suite that none is left.

    python -m tests.leftovers                  # after a suite: exit 0 with one line if none
    python -m tests.leftovers --paths=/tmp/x   # only processes using /tmp/x

The check lists the processes of ours still running, one line each, and exits 1 if there
are any: Slurm and munge daemons (and their job steps) using the tests' temporary
directories (`slimdeploy-munge-*`, pytest's `pytest-of-<user>`: in their command line,
working directory or SLURM_CONF), Python processes running this repository's entry
scripts and tools (`python <file here>`, `python -m <package here>`, or naming a file
here), `python -c` servers and pytest processes working here (pytest-xdist's workers
too), and any process working in a test's temporary directory or naming one; never itself or its ancestors (`make`).
Processes that are ending (zombies) are not listed; a process signalled as the suite
ended gets --wait_secs to go.

The guards live in deployment/cluster/process_guards.py, which the one-machine Slurm of
users and tests runs its daemons with, and are re-exported here for the tests:
- `die_with_parent` (a `preexec_fn`): the kernel sends the child SIGKILL when the thread
  that started it ends (prctl PR_SET_PDEATHSIG), even when pytest-timeout ends a hung worker with os._exit (no
  finalizer, no atexit) or a watchdog with SIGKILL. A child of fork() does not inherit it,
  so it only holds for a program that stays in the foreground.
- the keeper (`keeper_command`: `python -S -m deployment.cluster.process_guards keep
  --owner=PID [--user=U] -- daemon args`), what tests/slurm_cluster.py runs its daemons
  under: the daemon in the foreground as its child, with the guard above, the keeper a
  child subreaper, so whatever the daemon forks and leaves (slurmctld's slurmscriptd,
  slurmd's slurmstepd and the job's tasks) becomes the keeper's child, not init's. SIGTERM
  (from the owner, or from the kernel when the owner dies) stops the daemon, then the
  keeper kills every process left under it; slurmctld's keeper also kills the clients of
  its cluster a test left waiting (an `sbatch --wait` of a gone controller polls forever).
"""

import argparse
import os
import sys
import tempfile
import time

from deployment.cluster import process_guards
from deployment.cluster.one_node_slurm import DAEMONS, MUNGE_PREFIX
# Re-exported (the redundant alias says so): the tests' Popen calls name
# leftovers.die_with_parent as their preexec_fn.
from deployment.cluster.process_guards import die_with_parent as die_with_parent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the tests' temporary files live: pytest's base directories and the munge ones.
TEST_DIRS = (os.path.join(tempfile.gettempdir(), 'pytest-of-'),
             os.path.join(tempfile.gettempdir(), MUNGE_PREFIX))
SLURM_REASON = 'Slurm/munge of the tests'
_alive = process_guards.alive


# ---- The check -----------------------------------------------------------------------

class Process:
  """What /proc says of one process."""

  def __init__(self, pid, details=True):
    self.pid = pid
    with open('/proc/%d/stat' % pid) as stat:
      fields = stat.read().rsplit(')', 1)[1].split()
    self.state, self.ppid = fields[0], int(fields[1])
    self._start_ticks = int(fields[19])
    self.argv, self.cwd, self._environ = [], None, None
    if details:
      with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
        self.argv = [a.decode(errors='replace') for a in cmdline.read().split(b'\0')[:-1]]
      try:
        self.cwd = os.readlink('/proc/%d/cwd' % pid)
      except OSError:
        pass

  def env(self, name):
    if self._environ is None:
      try:
        with open('/proc/%d/environ' % self.pid, 'rb') as environ:
          pairs = environ.read().decode(errors='replace').split('\0')
      except OSError:
        pairs = []
      self._environ = dict(p.split('=', 1) for p in pairs if '=' in p)
    return self._environ.get(name)

  def age(self):
    """Seconds since it started."""
    with open('/proc/uptime') as uptime:
      now = float(uptime.read().split()[0])
    return now - self._start_ticks / os.sysconf('SC_CLK_TCK')

  def line(self):
    return '%d %s' % (self.pid, ' '.join(self.argv))


def is_keeper(process):
  """True for a keeper's command line (`python -S -m deployment.cluster.process_guards
  keep ...`)."""
  return process_guards.is_keeper(process.argv)


def ancestry(pid, table=None):
  """[Process] of `pid`, its parent and so on up to init (from `table`, {pid: Process},
  when given)."""
  chain = []
  while pid > 1:
    try:
      process = table[pid] if table is not None else Process(pid)
    except (KeyError, OSError, IndexError, ValueError):
      break
    chain.append(process)
    pid = process.ppid
  return chain


def kept(pid, table=None):
  """True when `pid` is a keeper or runs under one."""
  return any(is_keeper(p) for p in ancestry(pid, table))


def _processes(details=True):
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        yield Process(int(entry), details)
      except (OSError, IndexError, ValueError):
        continue   # Ended meanwhile.


def _under(path, dirs):
  """True when `path` (or a --flag=path) names something in one of `dirs` (prefixes)."""
  path = path.split('=', 1)[-1] if path.startswith('-') else path
  return any(path == d.rstrip('/') or path.startswith(d if d.endswith('-') else
                                                     d.rstrip('/') + '/') for d in dirs)


def _python_target(process):
  """('-m', module) / ('-c', None) / ('script', path) / (None, None) of a Python."""
  args = process.argv[1:]
  while args and args[0].startswith('-') and args[0] not in ('-m', '-c', '-'):
    args = args[1 + (args[0] in ('-W', '-X', '-Q')):]
  if not args:
    return None, None
  if args[0] == '-m':
    return '-m', args[1] if len(args) > 1 else ''
  if args[0] == '-c':
    return '-c', None
  return 'script', os.path.join(process.cwd or '/', args[0])


def why_ours(process, dirs=TEST_DIRS, root=ROOT):
  """Why `process` is one the tests started (a few words), or None."""
  if not process.argv:
    return None   # A kernel thread, or a process ending.
  program = os.path.basename(process.argv[0])
  args = process.argv[1:]
  conf = process.env('SLURM_CONF')
  if program in DAEMONS or program.startswith(':') or conf:
    if any(_under(a, dirs) for a in process.argv) or (conf and _under(conf, dirs)):
      return SLURM_REASON
  if process.cwd and _under(process.cwd, dirs) or any(_under(a, dirs) for a in args):
    return 'using a test directory'
  if not root:
    return None
  here = (root,)
  if program.startswith('python'):
    kind, target = _python_target(process)
    if kind == '-m' and target and (
        os.path.isdir(os.path.join(root, target.split('.')[0])) or
        os.path.isfile(os.path.join(root, target.split('.')[0] + '.py'))):
      return 'a module of this repository'
    if kind == 'script' and _under(os.path.realpath(target), here):
      return 'a script of this repository'
    if any(_under(a, here) for a in args):
      return 'naming this repository'
    # `python -c` servers of the tests, pytest-xdist's workers, pytest itself.
    if (kind == '-c' or target == 'pytest') and process.cwd and _under(process.cwd, here):
      return 'python %s working in this repository' % ('-c' if kind == '-c' else '-m pytest')
  elif program in ('sh', 'bash') and '-c' not in args:
    script = next((a for a in args if not a.startswith('-')), None)
    if script and _under(os.path.join(process.cwd or '/', script), here):
      return 'a script of this repository'
  return None


def _ancestors():
  found, pid = set(), os.getpid()
  while pid > 1:
    found.add(pid)
    try:
      pid = Process(pid, details=False).ppid
    except (OSError, IndexError, ValueError):
      break
  return found


def find(dirs=TEST_DIRS, root=ROOT):
  """[(Process, why)] of the processes of ours running now, this one and its ancestors
  aside."""
  skip, found = _ancestors(), []
  for process in _processes():
    if process.pid in skip or process.state in ('Z', 'X'):
      continue
    why = why_ours(process, dirs, root)
    if why:
      found.append((process, why))
  return found


def check(dirs=TEST_DIRS, root=ROOT, wait_secs=10.0, out=sys.stdout):
  """Prints the processes of ours (after up to `wait_secs` for them to end); -> 1 if any,
  else 0 after one line."""
  deadline = time.monotonic() + wait_secs
  found = find(dirs, root)
  while found and time.monotonic() < deadline:
    time.sleep(0.5)
    found = find(dirs, root)
  if not found:
    print('leftovers: no process of the tests is running', file=out)
    return 0
  for process, why in found:
    print('leftover (%s): %s' % (why, process.line()[:300]), file=out)
  return 1


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -m tests.leftovers', description=(
      'Lists the processes the tests left running (exit 1 if any).'))
  parser.add_argument('--paths', default=None, help='Comma-separated directories: only '
                      'processes using them count (default: the tests\' temporary '
                      'directories and, for Python processes, this repository).')
  parser.add_argument('--wait_secs', type=float, default=10.0,
                      help='How long processes may take to end before they are listed.')
  options = parser.parse_args(argv)
  if options.paths is None:
    return check(wait_secs=options.wait_secs)
  dirs = tuple(os.path.abspath(p) for p in options.paths.split(',') if p)
  return check(dirs, root=None, wait_secs=options.wait_secs)


if __name__ == '__main__':
  sys.exit(main())
