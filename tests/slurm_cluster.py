"""A real one-node Slurm for the tests: deployment/cluster/one_node_slurm.py's, which users
start with `python -m deployment.cluster.one_node_slurm start`, owned here by the test
process itself, and what the tests read of it.

`install()` installs Debian's packages with apt-get where they are missing and the tests
run as root (CI does); elsewhere it returns why not, and the Slurm tests skip with it.
`SlurmCluster` is `OneNodeSlurm` (slurm.conf in a scratch directory: 16 CPUs declared,
partitions `main` and `urgent`, whose jobs preempt main's; no slurmdbd, so the jobs' ends
are read from a jobcomp/filetxt log: `job`, `history`) and, as a context manager, stops
its daemons whatever happens. Every client call goes through `env` (SLURM_CONF).

The daemons end with the process that started them, however it ends (pytest-timeout's
os._exit, a SIGKILL): each runs in the foreground under a keeper owned by this process
(tests/leftovers.py says how). Daemons of an earlier run that are no keeper's (an older
interrupted run's) are killed before a cluster starts; every cluster has its own munge
socket and state, so nothing of another cluster is ever used or skipped.
"""

import fcntl
import functools
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from deployment.cluster import one_node_slurm, process_guards
from deployment.cluster.one_node_slurm import MUNGE_KEY, PACKAGES
# Re-exported (the redundant alias says so): tests/test_leftovers.py starts its stand-in
# daemon with slurm_cluster.start_daemon.
from deployment.cluster.one_node_slurm import start_daemon as start_daemon
from tests import leftovers

_stop = process_guards.stop_daemon


@functools.lru_cache(maxsize=None)
def install():
  """None once Slurm and munge are installed (apt-get as root), else the reason they are not.

  Raises:
    RuntimeError: apt-get ran as root and failed (its last lines).
  """
  # pytest-xdist's workers may ask at once: one apt-get at a time (dpkg holds a lock).
  with open(os.path.join(tempfile.gettempdir(), 'slimdeploy-slurm-install.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    return _install()


def _install():
  if one_node_slurm.missing() is None and os.path.exists(MUNGE_KEY):
    return None
  if os.geteuid() != 0 or not shutil.which('apt-get'):
    return ('Slurm is not installed and cannot be here (needs root and apt-get): '
            'apt-get install -y %s' % ' '.join(PACKAGES))
  env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
  for command in (['apt-get', 'update', '-qq'],
                  ['apt-get', 'install', '-y', '-qq'] + list(PACKAGES)):
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
      raise RuntimeError('%s failed (%d): %s' % (' '.join(command), result.returncode,
                                                (result.stdout + result.stderr)[-2000:]))
  if not os.path.exists(MUNGE_KEY):   # The package's postinst makes one; be sure.
    subprocess.run(['mungekey', '--create', '--keyfile', MUNGE_KEY], check=True)
    shutil.chown(MUNGE_KEY, 'munge', 'munge')
  return None


class SlurmCluster(one_node_slurm.OneNodeSlurm):
  """munged + slurmctld + slurmd on this host; `env` points clients at them. slurmctld's
  keeper also kills the clients of this cluster a test left waiting (processes whose
  SLURM_CONF is this one's: an `sbatch --wait` of a gone controller polls forever)."""
  END_CLIENTS = 'SLURM_CONF'

  def __enter__(self):
    end_stale_daemons()
    return super().__enter__()

  def history(self, job_id):
    """[{field: value}] of the job's lines in the jobcomp/filetxt log (JobState, ExitCode,
    StartTime, EndTime...: what sacct would show), oldest first: one per end, a requeue's
    (JobState=PENDING) included.

    The log, not `scontrol show job`: MinJobAge=4 purges ended jobs from slurmctld
    within about a minute, and keeps `sbatch --wait` polling every 2 s (it sleeps 2 s,
    then 4 times longer, up to 32 s, while that is below MinJobAge / 2: up to half a
    minute late with the default 300)."""
    path = os.path.join(self.dir, 'jobcomp.log')
    if not os.path.exists(path):
      return []
    with open(path) as log:
      return [dict(re.findall(r'(\w+)=(\S*)', line)) for line in log
              if re.search(r'\bJobId=%s\b' % job_id, line)]

  def job(self, job_id):
    """The job's last line of `history`, or None before the job has ended."""
    lines = self.history(job_id)
    return lines[-1] if lines else None

  def wait_for_end(self, job_id, timeout):
    """Polls until the job has ended and its processes too (a cancelled job's line is
    written at the scancel, its tasks have KillWait to end: squeue lists it meanwhile,
    state CG); a requeue's line (JobState=PENDING) is no end, though squeue may miss the
    job for a moment then. Returns its `job` fields."""
    deadline = time.time() + timeout
    while time.time() < deadline:
      fields = self.job(job_id)
      if fields and fields['JobState'] != 'PENDING' and not self.queued(job_id):
        return fields
      time.sleep(0.5)
    raise AssertionError('Slurm job %s did not end within %d s:\n%s'
                         % (job_id, timeout, self.daemon_logs()))


def end_stale_daemons():
  """Kills the munge and Slurm daemons of the tests (tests/leftovers.py's rules: their
  command line or SLURM_CONF in the tests' temporary directories) that no live keeper
  runs, the processes under them (a job's tasks), and clients of a controller that is
  gone (an `sbatch --wait`): an earlier run's, interrupted before the keepers existed or
  with its keeper killed. Live clusters' daemons and clients, and daemons not of the
  tests, are left alone."""
  ours = {p.pid: p for p, why in leftovers.find() if why == leftovers.SLURM_REASON}
  daemons = {pid for pid, p in ours.items() if _is_daemon(p) and not leftovers.kept(pid)}
  live = {p.env('SLURM_CONF') for pid, p in ours.items()
          if os.path.basename(p.argv[0]) == 'slurmctld' and pid not in daemons}
  # A client is stale after a minute (a test's `scontrol` of a daemonless conf is not).
  stale = [p for pid, p in ours.items() if any(a.pid in daemons for a in leftovers.ancestry(
      pid)) or (not leftovers.kept(pid) and p.env('SLURM_CONF') not in live
                and p.age() > 60)]
  for process in stale:
    try:
      os.kill(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
  # Private munge directories no process uses, made over 10 minutes ago (a younger one
  # may be another cluster's that is starting): an interrupted run's.
  used = ' '.join(' '.join(p.argv) for p, _ in leftovers.find())
  for path in glob.glob(leftovers.TEST_DIRS[1] + '*'):
    try:
      old = time.time() - os.path.getmtime(path) > 600
    except OSError:
      continue
    if old and os.path.isdir(path) and path + '/' not in used:
      shutil.rmtree(path, ignore_errors=True)
  return stale


def _is_daemon(process):
  program = process.argv[0]
  return os.path.basename(program) in leftovers.DAEMONS or program.startswith(': slurm')


_SHARED = []


def shared(request, tmp_path_factory):
  """This pytest process's SlurmCluster, for the session fixtures of the test modules that
  submit jobs (the recipe's, its requeues'): started by the first to ask, stopped at the
  session's end. Where Slurm cannot be installed, the test skips with the reason."""
  reason = install()
  if reason:
    pytest.skip(reason)
  if not _SHARED:
    cluster = SlurmCluster(tmp_path_factory.mktemp('slurm'))
    _SHARED.append(cluster.__enter__())
    request.addfinalizer(lambda: _SHARED.pop().__exit__(None, None, None))
  return _SHARED[0]
