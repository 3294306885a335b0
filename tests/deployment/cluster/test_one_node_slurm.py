"""deployment/cluster/one_node_slurm.py as a user runs it: `start` refuses in one line
without Slurm (naming the apt-get packages) or without root, else leaves a one-node Slurm
running that takes jobs through the SLURM_CONF it prints; `stop` ends it and its jobs and
leaves no process, never a user's own process that merely has SLURM_CONF set; and a
supervisor killed outright takes its daemons and their jobs with it (its keepers)."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from deployment.cluster import one_node_slurm
from tests import leftovers, slurm_cluster

TOOL = [sys.executable, '-m', 'deployment.cluster.one_node_slurm']


def tool(*args, **env):
  return subprocess.run(TOOL + list(args), cwd=leftovers.ROOT, capture_output=True, text=True,
                        env=dict(os.environ, **env), timeout=180)


def test_without_slurm_start_refuses_in_one_line_naming_the_packages(tmp_path):
  empty = tmp_path / 'bin'
  empty.mkdir()
  result = tool('start', '--state_dir=%s' % (tmp_path / 'slurm'), PATH=str(empty))
  assert (result.returncode, result.stdout) == (2, ''), result
  line, = result.stderr.splitlines()
  # (The daemons are also looked for in /usr/sbin, often not on a user's PATH.)
  assert re.fullmatch(r'error: Slurm and munge are not installed \(no [a-z, ]*sbatch[a-z, ]*\): '
                      r'apt-get install -y slurmctld slurmd slurm-client munge', line), line
  assert not (tmp_path / 'slurm').exists()


def test_start_refuses_without_root_and_stop_without_a_cluster_says_so(tmp_path, capsys,
                                                                      monkeypatch):
  monkeypatch.setattr(one_node_slurm, 'missing', lambda: None)
  monkeypatch.setattr(os, 'geteuid', lambda: 1000)
  assert one_node_slurm.start(str(tmp_path)) == 2
  assert capsys.readouterr().err == ('error: the one-node Slurm must start as root: slurmd '
                                     'starts each job as its user and munged runs as the '
                                     'munge user\n')
  result = tool('stop', '--state_dir=%s' % tmp_path)
  assert (result.returncode, result.stdout) == (0, 'no one-node Slurm runs from %s\n'
                                                % tmp_path), result


def _munge_dir(state_dir):
  with open(os.path.join(state_dir, 'slurm.conf')) as conf:
    return os.path.dirname(re.search(r'AuthInfo=socket=(\S+?),', conf.read()).group(1))


def _left(dirs, timeout):
  deadline = time.monotonic() + timeout
  while True:
    found = [p.line() for p, _ in leftovers.find(dirs, root=None)]
    if not found or time.monotonic() > deadline:
      return found
    time.sleep(0.2)


@pytest.fixture
def state_dir(tmp_path):
  """A state directory whose one-node Slurm is stopped after the test, whatever happens."""
  reason = slurm_cluster.install()
  if reason:
    pytest.skip(reason)
  directory = str(tmp_path / 'slurm')
  yield directory
  pid = one_node_slurm.running(directory)
  if pid:
    os.kill(pid, signal.SIGKILL)   # Its keepers stop the rest.
  assert _left([directory], 30) == []


@pytest.mark.slow
@pytest.mark.cluster
def test_start_takes_jobs_and_stop_ends_everything_but_a_users_shell(state_dir):
  began = time.time()
  started = tool('start', '--state_dir=%s' % state_dir)
  print('start: %.1f s' % (time.time() - began))
  conf = os.path.join(state_dir, 'slurm.conf')
  assert (started.returncode, started.stdout) == (0, 'export SLURM_CONF=%s\n' % conf), started
  assert 'partitions main and urgent' in started.stderr
  munge_dir = _munge_dir(state_dir)
  env = dict(os.environ, SLURM_CONF=conf)
  partitions = subprocess.run(['sinfo', '-h', '-o', '%P %T'], env=env, capture_output=True,
                              text=True, check=True).stdout.split('\n')
  assert partitions[:2] == ['main* idle', 'urgent idle'], partitions
  job = subprocess.run(['sbatch', '--wait', '--parsable', '--chdir=' + state_dir,
                        '--output=job.out', '--wrap=echo ran on $SLURM_JOB_NODELIST'], env=env,
                       capture_output=True, text=True, timeout=120)
  assert job.returncode == 0, job
  assert open(os.path.join(state_dir, 'job.out')).read().startswith('ran on ')
  again = tool('start', '--state_dir=%s' % state_dir)
  assert again.returncode == 2 and again.stderr.startswith(
      'error: a one-node Slurm already runs from %s' % state_dir), again
  shell = subprocess.Popen(['sleep', '300'], env=env)   # A user's, with SLURM_CONF set.
  try:
    sleeper = subprocess.run(['sbatch', '--parsable', '--wrap=sleep 300', '--output=/dev/null'],
                             env=env, capture_output=True, text=True, check=True)
    began = time.time()
    stopped = tool('stop', '--state_dir=%s' % state_dir)
    print('stop, with a job running: %.1f s' % (time.time() - began))
    assert (stopped.returncode, stopped.stdout) == (
        0, 'stopped the one-node Slurm of %s\n' % state_dir), stopped
    assert shell.poll() is None, 'stop killed a process of the user'
  finally:
    shell.kill()
    shell.wait()
  assert sleeper.stdout.strip()
  assert _left([state_dir, munge_dir], 10) == []
  assert not os.path.exists(munge_dir) and one_node_slurm.running(state_dir) is None


@pytest.mark.slow
@pytest.mark.cluster
def test_a_supervisor_killed_outright_takes_its_daemons_and_jobs_with_it(state_dir):
  assert tool('start', '--state_dir=%s' % state_dir).returncode == 0
  munge_dir = _munge_dir(state_dir)
  env = dict(os.environ, SLURM_CONF=os.path.join(state_dir, 'slurm.conf'))
  subprocess.run(['sbatch', '--wrap=sleep 300', '--output=/dev/null'], env=env, check=True,
                 capture_output=True)
  deadline = time.time() + 60
  while 'R' not in subprocess.run(['squeue', '-h', '-o', '%t'], env=env, capture_output=True,
                                  text=True).stdout:
    assert time.time() < deadline, 'the job does not run'
    time.sleep(0.2)
  # 'R' comes as the step starts, its command a moment later (under load, after the look).
  names = ('munged', 'slurmctld', 'slurmd', 'slurmstepd', 'sleep 300')
  while True:
    running = '\n'.join(_left([state_dir, munge_dir], 0))
    if all(name in running for name in names):
      break
    assert time.time() < deadline, running
    time.sleep(0.2)
  os.kill(one_node_slurm.running(state_dir), signal.SIGKILL)
  try:
    assert _left([state_dir, munge_dir], 30) == []
  finally:
    subprocess.run(['rm', '-rf', munge_dir], check=False)   # What its end would remove.
