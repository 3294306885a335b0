"""A real one-node Slurm for the tests: Debian's slurmctld, slurmd and munge.

`install()` installs the packages with apt-get where they are missing and the tests run
as root (CI does); elsewhere it returns why not, and the Slurm tests skip with it.
`SlurmCluster` writes slurm.conf in a scratch directory (16 CPUs declared on this 2-core
machine with SlurmdParameters=config_overrides; no slurmdbd: the jobs' ends are in a
jobcomp/filetxt log, the lines sacct would show), starts a private munged (its own socket,
the key in /etc/munge), slurmctld and slurmd on free ports, and, as a context manager,
stops all three whatever happens. Every client call goes through `env` (SLURM_CONF).
"""

import fcntl
import functools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

import portpicker

PACKAGES = ('slurmctld', 'slurmd', 'slurm-client', 'munge')
PROGRAMS = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'scontrol', 'scancel', 'sinfo', 'squeue')
MUNGE_KEY = '/etc/munge/munge.key'
RESERVED_PORTS = (24000, 24999)   # MpiParams=ports: srun --resv-ports hands these out.

SLURM_CONF = """\
ClusterName=slimdeploy-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
MpiParams=ports={ports[0]}-{ports[1]}
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.log
MinJobAge=4
ReturnToService=2
KillWait=30
NodeName={node} NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


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
  if all(shutil.which(p) for p in PROGRAMS) and os.path.exists(MUNGE_KEY):
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


def _node_name():
  """This host's short name when it resolves (as on a real cluster), else localhost."""
  host = socket.gethostname().split('.')[0]
  try:
    socket.gethostbyname(host)
    return host
  except OSError:
    return 'localhost'


class SlurmCluster:
  """munged + slurmctld + slurmd on this host; `env` points clients at them."""

  def __init__(self, directory):
    self.dir = str(directory)
    self.node = _node_name()
    # munged runs as the munge user, which cannot enter pytest's root-only tmp dirs.
    self.munge_dir = tempfile.mkdtemp(prefix='slimdeploy-munge-')
    shutil.chown(self.munge_dir, 'munge', 'munge')
    os.chmod(self.munge_dir, 0o711)   # munged: clients must reach its socket.
    self.conf = os.path.join(self.dir, 'slurm.conf')
    self.env = dict(os.environ, SLURM_CONF=self.conf)
    for name in list(self.env):
      if name.startswith(('SLURM_', 'SBATCH_', 'SRUN_')) and name != 'SLURM_CONF':
        del self.env[name]   # Tests run inside a Slurm job still talk to this one.

  def _write_conf(self):
    for sub in ('state', 'spool'):
      os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
    ctld_port, slurmd_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
    with open(self.conf, 'w') as conf:
      conf.write(SLURM_CONF.format(
          host=socket.gethostname().split('.')[0], node=self.node, dir=self.dir,
          ctld_port=ctld_port, slurmd_port=slurmd_port, ports=RESERVED_PORTS,
          munge_socket=os.path.join(self.munge_dir, 'munge.socket')))

  def __enter__(self):
    try:
      self._write_conf()
      munge = os.path.join(self.munge_dir, 'munge')
      self._run(['runuser', '-u', 'munge', '--', 'munged', '--socket=%s.socket' % munge,
                 '--pid-file=%s.pid' % munge, '--log-file=%s.log' % munge,
                 '--seed-file=%s.seed' % munge])
      self._run(['slurmctld', '-i'])
      self._run(['slurmd', '-N', self.node])
      self._wait_until_idle()
    except BaseException:
      self.__exit__()
      raise
    return self

  def _run(self, command):
    result = subprocess.run(command, env=self.env, capture_output=True, text=True,
                            check=False, timeout=60)
    if result.returncode:
      raise RuntimeError('%s failed (%d): %s\n%s' % (command[0], result.returncode,
                                                    result.stdout + result.stderr,
                                                    self.daemon_logs()))
    return result.stdout

  def _wait_until_idle(self, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
      state = subprocess.run(['sinfo', '-h', '-o', '%T'], env=self.env, capture_output=True,
                             text=True, check=False).stdout.strip()
      if state == 'idle':
        return
      time.sleep(0.5)
    raise RuntimeError('the Slurm node is not idle after %d s\n%s'
                       % (timeout, self.daemon_logs()))

  def daemon_logs(self):
    paths = [os.path.join(self.dir, n) for n in ('slurmctld.log', 'slurmd.log')]
    paths.append(os.path.join(self.munge_dir, 'munge.log'))
    return '\n'.join('--- %s\n%s' % (p, open(p, errors='replace').read()[-3000:])
                     for p in paths if os.path.exists(p))

  def __exit__(self, *exc_info):
    """Cancels every job of this private controller and waits for them to end, then stops
    slurmd, slurmctld and munged by the process ids in their pid files (SIGTERM, then
    SIGKILL after 10 s)."""
    subprocess.run(['scancel', '--user=root'], env=self.env, capture_output=True,
                   check=False, timeout=30)
    deadline = time.time() + 45   # KillWait (30 s), then the tasks are killed.
    while time.time() < deadline and self._queued():
      time.sleep(0.5)
    for name in ('slurmd.pid', 'slurmctld.pid'):
      _stop(os.path.join(self.dir, name))
    _stop(os.path.join(self.munge_dir, 'munge.pid'))
    shutil.rmtree(self.munge_dir, ignore_errors=True)

  def job(self, job_id):
    """{field: value} of the job's line in the jobcomp/filetxt log (JobState, ExitCode,
    StartTime, EndTime...: what sacct would show), or None before the job has ended.

    The log, not `scontrol show job`: MinJobAge=4 purges ended jobs from slurmctld
    within about a minute, and keeps `sbatch --wait` polling every 2 s (it sleeps 2 s,
    then 4 times longer, up to 32 s, while that is below MinJobAge / 2: up to half a
    minute late with the default 300)."""
    path = os.path.join(self.dir, 'jobcomp.log')
    lines = []
    if os.path.exists(path):
      with open(path) as log:
        lines = [line for line in log if re.search(r'\bJobId=%s\b' % job_id, line)]
    return dict(re.findall(r'(\w+)=(\S*)', lines[-1])) if lines else None

  def wait_for_end(self, job_id, timeout):
    """Polls until the job has ended and its processes too (a cancelled job's line is
    written at the scancel, its tasks have KillWait to end: squeue lists it meanwhile,
    state CG); returns its `job` fields."""
    deadline = time.time() + timeout
    while time.time() < deadline:
      fields = self.job(job_id)
      if fields and not self._queued(job_id):
        return fields
      time.sleep(0.5)
    raise AssertionError('Slurm job %s did not end within %d s:\n%s'
                         % (job_id, timeout, self.daemon_logs()))


  def _queued(self, job_id=None):
    """True while squeue lists the job (any job when None), completing ones included."""
    command = ['squeue', '-h'] + (['-j', str(job_id)] if job_id else [])
    return bool(subprocess.run(command, env=self.env, capture_output=True, text=True,
                               check=False).stdout.strip())


def _stop(pid_file, grace_secs=10):
  try:
    with open(pid_file) as handle:
      pid = int(handle.read().split()[0])
  except (OSError, ValueError, IndexError):
    return
  for signum, wait in ((15, grace_secs), (9, 5)):
    try:
      os.kill(pid, signum)
    except ProcessLookupError:
      return
    deadline = time.time() + wait
    while time.time() < deadline:
      try:
        os.kill(pid, 0)
      except ProcessLookupError:
        return
      time.sleep(0.1)
