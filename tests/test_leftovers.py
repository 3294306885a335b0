"""tests/leftovers.py: daemons started as tests/slurm_cluster.py starts them die with the
process that started them, even by SIGKILL (no finalizer runs), and so does what they
leave behind; servers with the `die_with_parent` guard die with their starter; and the
check after the suite finds the processes of ours, and only those."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests import leftovers, slurm_cluster

# Stands in for a daemon in the foreground that leaves a process of its own (as slurmd
# leaves a job's slurmstepd): a subshell starts a sleep and exits, so that sleep's parent
# ends at once; then the daemon itself sleeps. All of them work in $1.
STAND_IN = 'cd "$1" && (sleep 600 &) && exec sleep 600'

# The starter: starts what argv[1] says (in the directory argv[2]), prints `ready` (the
# Slurm cluster's munge directory first), then waits to be killed. It ends without
# `ready` if the job does not run within 2 minutes.
STARTER = r'''
import functools, os, subprocess, sys, time
from tests import leftovers, slurm_cluster
kind, directory = sys.argv[1:3]
if kind == 'daemon':
  slurm_cluster.start_daemon(['sh', '-c', %r, 'stand-in', directory],
                             os.path.join(directory, 'daemon.out'), dict(os.environ))
elif kind == 'guarded':
  subprocess.Popen(['sleep', '600'], cwd=directory,
                   preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid()))
elif kind == 'slurm':
  cluster = slurm_cluster.SlurmCluster(os.path.join(directory, 'slurm')).__enter__()
  print(cluster.munge_dir, flush=True)
  subprocess.Popen(['sbatch', '--wait', '--chdir=' + directory, '--wrap=sleep 600'],
                   env=cluster.env, stdout=subprocess.DEVNULL)
  deadline = time.time() + 120
  while 'R' not in subprocess.run(['squeue', '-h', '-o', '%%t'], env=cluster.env,
                                  capture_output=True, text=True).stdout:
    assert time.time() < deadline, 'the job does not run'
    time.sleep(0.2)
print('ready', flush=True)
time.sleep(600)
''' % STAND_IN


def _start(kind, directory):
  """The starter (a fresh interpreter) once it says `ready`; -> (Popen, its lines)."""
  starter = subprocess.Popen([sys.executable, '-c', STARTER, kind, str(directory)],
                             cwd=leftovers.ROOT, stdout=subprocess.PIPE, text=True)
  lines = []
  while not lines or lines[-1] != 'ready':
    line = starter.stdout.readline()
    if not line:
      starter.wait()
      pytest.fail('the starter ended with status %s: %s' % (starter.returncode, lines))
    lines.append(line.strip())
  return starter, lines


def _left(dirs, timeout):
  """The processes using `dirs` still running after up to `timeout` seconds."""
  deadline = time.monotonic() + timeout
  found = leftovers.find(dirs, root=None)
  while found and time.monotonic() < deadline:
    time.sleep(0.2)
    found = leftovers.find(dirs, root=None)
  return [process.line() for process, _ in found]


def _sleeps(directory, timeout=30):
  """The stand-in's two `sleep 600` in `directory` (the daemon and the one it left), once
  both run (or after `timeout` seconds)."""
  deadline = time.monotonic() + timeout
  while True:
    sleeps = [p for p, _ in leftovers.find([str(directory)], root=None)
              if p.argv == ['sleep', '600']]
    if len(sleeps) >= 2 or time.monotonic() > deadline:
      return sleeps
    time.sleep(0.1)


def _kill(starter):
  starter.send_signal(signal.SIGKILL)
  starter.wait()
  starter.stdout.close()


def test_a_kept_daemon_and_what_it_left_die_when_its_starter_is_sigkilled(tmp_path):
  starter, _ = _start('daemon', tmp_path)
  try:
    sleeps = _sleeps(tmp_path)
    assert len(sleeps) == 2, _left([str(tmp_path)], 0)
    keeper = leftovers.Process(sleeps[0].ppid)
    assert leftovers.is_keeper(keeper) and keeper.ppid == starter.pid, keeper.argv
    # The left sleep's parent ended: the keeper took it, not init.
    assert [p.ppid for p in sleeps] == [keeper.pid] * 2, [p.line() for p in sleeps]
  finally:
    _kill(starter)
  assert _left([str(tmp_path)], 15) == []
  assert not leftovers._alive(keeper.pid)  # pylint: disable=protected-access


def test_stopping_a_kept_daemon_ends_it_and_what_it_left(tmp_path):
  """The normal end (SlurmCluster.__exit__): SIGTERM to the keeper ends the daemon (the
  keeper exits with its status, 128 + 15) and the sleep it left."""
  keeper = slurm_cluster.start_daemon(['sh', '-c', STAND_IN, 'stand-in', str(tmp_path)],
                                      str(tmp_path / 'daemon.out'), dict(os.environ))
  try:
    assert len(_sleeps(tmp_path)) == 2, _left([str(tmp_path)], 0)
  finally:
    slurm_cluster._stop(keeper)  # pylint: disable=protected-access
  assert keeper.returncode == 128 + signal.SIGTERM, (tmp_path / 'daemon.out').read_text()
  assert _left([str(tmp_path)], 0) == []


def test_a_guarded_server_dies_when_its_starter_is_sigkilled(tmp_path):
  starter, _ = _start('guarded', tmp_path)
  try:
    running = _left([str(tmp_path)], 0)   # The starter (its argv names tmp_path), sleep.
    assert [line.split(' ', 1)[1] for line in running if line.endswith('sleep 600')] == [
        'sleep 600'], running
  finally:
    _kill(starter)
  assert _left([str(tmp_path)], 10) == []


@pytest.mark.slow
def test_a_slurm_cluster_its_job_and_client_die_when_its_starter_is_sigkilled(tmp_path):
  """The daemons, the job (its slurmstepd, its `sleep`) and the `sbatch --wait` waiting
  on it, started as tests/slurm_recipe_jobs.py starts them."""
  reason = slurm_cluster.install()
  if reason:
    pytest.skip(reason)
  starter, lines = _start('slurm', tmp_path)
  dirs = [str(tmp_path), lines[0]]   # The cluster's state, the job's, munge's.
  try:
    # squeue says R once slurmctld has placed the job; slurmd starts its slurmstepd and
    # the step's `sleep` a moment later (CI saw the R before the slurmstepd).
    names = ('munged', 'slurmctld', 'slurmd', 'slurmstepd', 'sleep 600', 'sbatch --wait')
    deadline = time.monotonic() + 60
    running = '\n'.join(_left(dirs, 0))
    while not all(name in running for name in names) and time.monotonic() < deadline:
      time.sleep(0.2)
      running = '\n'.join(_left(dirs, 0))
    for name in names:
      assert name in running, running
  finally:
    _kill(starter)
  assert _left(dirs, 30) == []
  shutil.rmtree(lines[0], ignore_errors=True)   # The munge directory its exit left.


def test_the_check_lists_the_processes_of_ours_and_exits_1(tmp_path):
  check = [sys.executable, '-m', 'tests.leftovers', '--paths=%s' % tmp_path, '--wait_secs=0']
  result = subprocess.run(check, cwd=leftovers.ROOT, capture_output=True, text=True)
  assert (result.returncode, result.stdout.count('\n')) == (0, 1), result
  sleeper = subprocess.Popen(['sleep', '600'], cwd=tmp_path)
  try:
    result = subprocess.run(check, cwd=leftovers.ROOT, capture_output=True, text=True)
  finally:
    sleeper.kill()
    sleeper.wait()
  assert result.returncode == 1, result
  assert result.stdout.splitlines() == [
      'leftover (using a test directory): %d sleep 600' % sleeper.pid], result.stdout


class _Seen(leftovers.Process):
  """A process as /proc would show it."""

  def __init__(self, argv, cwd='/', environ=None):  # pylint: disable=super-init-not-called
    self.pid, self.ppid, self.state = 0, 1, 'S'
    self.argv, self.cwd, self._environ = argv, cwd, dict(environ or {})


@pytest.mark.parametrize('argv, cwd, environ, ours', [
    (['munged', '--foreground', '--socket=/tmp/slimdeploy-munge-ab12/munge.socket'], '/',
     {}, True),
    (['slurmd', '-D', '-N', 'vm'], '/', {'SLURM_CONF': '/tmp/pytest-of-root/p-1/slurm.conf'},
     True),
    (['slurmd', '-D'], '/', {'SLURM_CONF': '/etc/slurm/slurm.conf'}, False),  # Not ours.
    (['/usr/sbin/munged'], '/', {}, False),   # The system's munged.
    (['python3', os.path.join(leftovers.ROOT, 'train_image_classifier.py'), '--x=1'], '/',
     {}, True),
    (['python', 'eval.py'], leftovers.ROOT, {}, True),
    (['python', '-u', '-m', 'datasets.data_service', '--role=worker'], '/', {}, True),
    (['python', '-c', 'import tensorflow'], leftovers.ROOT, {}, True),
    (['python', '-c', 'import tensorflow'], '/home', {}, False),
    (['python', '/tmp/elsewhere.py'], leftovers.ROOT, {}, False),
    (['sleep', '5'], '/tmp/pytest-of-root/pytest-3/test_x0', {}, True),
    (['sleep', '5'], '/', {}, False),
    (['bash', 'configs/slurm/train.sbatch', '1'], leftovers.ROOT, {}, True),
])
def test_what_counts_as_ours(argv, cwd, environ, ours):
  dirs = ('/tmp/pytest-of-', '/tmp/slimdeploy-munge-')
  assert bool(leftovers.why_ours(_Seen(argv, cwd, environ), dirs)) == ours
