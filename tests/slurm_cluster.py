"""A real one-node Slurm for the tests: Debian's slurmctld, slurmd and munge.

`install()` installs the packages with apt-get where they are missing and the tests run
as root (CI does); elsewhere it returns why not, and the Slurm tests skip with it.
`SlurmCluster` writes slurm.conf in a scratch directory (16 CPUs declared on this 2-core
machine with SlurmdParameters=config_overrides; no slurmdbd: the jobs' ends are in a
jobcomp/filetxt log, the lines sacct would show), starts a private munged (its own socket,
the key in /etc/munge), slurmctld and slurmd on free ports, and, as a context manager,
stops all three whatever happens. Every client call goes through `env` (SLURM_CONF).

The daemons end with the process that started them, however it ends (pytest-timeout's
os._exit, a SIGKILL): each runs in the foreground (munged -F, slurmctld -D, slurmd -D)
under a keeper of tests/leftovers.py, which stops it when its owner dies and, as the
child subreaper of everything the daemon forks, kills what it leaves (slurmscriptd, the
jobs' slurmstepd and tasks). Daemons of an earlier run that are no keeper's (an older
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
import socket
import subprocess
import tempfile
import time

import portpicker

from tests import leftovers

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
    self.munge_dir = tempfile.mkdtemp(prefix=leftovers.MUNGE_PREFIX)
    shutil.chown(self.munge_dir, 'munge', 'munge')
    os.chmod(self.munge_dir, 0o711)   # munged: clients must reach its socket.
    self.conf = os.path.join(self.dir, 'slurm.conf')
    self.daemons = []   # Their keepers (subprocess.Popen), in start order.
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
      end_stale_daemons()
      self._write_conf()
      munge = os.path.join(self.munge_dir, 'munge')
      self._start('munged', ['munged', '--foreground', '--socket=%s.socket' % munge,
                             '--pid-file=%s.pid' % munge, '--log-file=%s.log' % munge,
                             '--seed-file=%s.seed' % munge], user='munge')
      self._wait_for_munge(munge + '.socket')
      # -f: the configuration in the command line too (tests/leftovers.py finds them).
      # slurmctld's keeper also ends what waits on this controller (an `sbatch --wait`).
      self._start('slurmctld', ['slurmctld', '-D', '-i', '-f', self.conf],
                  clients_env='SLURM_CONF')
      self._start('slurmd', ['slurmd', '-D', '-N', self.node, '-f', self.conf])
      self._wait_until_idle()
    except BaseException:
      self.__exit__()
      raise
    return self

  def _start(self, name, argv, user=None, clients_env=None):
    keeper = start_daemon(argv, os.path.join(self.dir, name + '.out'), self.env, user,
                          clients_env)
    keeper.name = name
    self.daemons.append(keeper)

  def _check_daemons(self):
    ended = ['%s (status %d)' % (k.name, k.returncode) for k in self.daemons
             if k.poll() is not None]
    if ended:
      raise RuntimeError('%s ended\n%s' % (', '.join(ended), self.daemon_logs()))

  def _wait_for_munge(self, path, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
      self._check_daemons()
      with socket.socket(socket.AF_UNIX) as client:
        try:
          client.connect(path)
          return
        except OSError:
          time.sleep(0.1)
    raise RuntimeError('munged does not answer on %s after %d s\n%s'
                       % (path, timeout, self.daemon_logs()))

  def _wait_until_idle(self, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
      self._check_daemons()
      state = subprocess.run(['sinfo', '-h', '-o', '%T'], env=self.env, capture_output=True,
                             text=True, check=False).stdout.strip()
      if state == 'idle':
        return
      time.sleep(0.5)
    raise RuntimeError('the Slurm node is not idle after %d s\n%s'
                       % (timeout, self.daemon_logs()))

  def daemon_logs(self):
    paths = [os.path.join(self.dir, n) for n in ('slurmctld.log', 'slurmd.log', 'munged.out',
                                                 'slurmctld.out', 'slurmd.out')]
    paths.append(os.path.join(self.munge_dir, 'munge.log'))
    return '\n'.join('--- %s\n%s' % (p, open(p, errors='replace').read()[-3000:])
                     for p in paths if os.path.exists(p))

  def __exit__(self, *exc_info):
    """Cancels every job of this private controller and waits for them to end, then stops
    slurmd, slurmctld and munged (SIGTERM to each keeper: SIGTERM to its daemon, SIGKILL
    after 10 s, then whatever it left is killed)."""
    try:
      if len(self.daemons) > 1 and self.daemons[1].poll() is None:   # slurmctld runs.
        subprocess.run(['scancel', '--user=root'], env=self.env, capture_output=True,
                       check=False, timeout=30)
        deadline = time.time() + 45   # KillWait (30 s), then the tasks are killed.
        while time.time() < deadline and self._queued():
          time.sleep(0.5)
    finally:
      for keeper in reversed(self.daemons):
        _stop(keeper)
      self.daemons = []
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


def start_daemon(argv, out_path, env, user=None, clients_env=None):
  """-> the keeper (subprocess.Popen) of `argv` run in the foreground under a keeper of
  tests/leftovers.py owned by this process (as `user`), in a session of its own (a
  terminal's Ctrl-C reaches pytest, which stops it), its output appended to `out_path`.
  Stop it with `_stop`; it also ends, and everything under it, when this process dies
  (and with `clients_env`, the processes whose value of that variable is `env`'s: see
  tests/leftovers.py)."""
  with open(out_path, 'ab') as out:
    return subprocess.Popen(
        leftovers.keeper_command(argv, user=user, grace_secs=10, clients_env=clients_env),
        cwd=leftovers.ROOT,
        env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True)


def _stop(keeper, grace_secs=20):
  """SIGTERM to a keeper; SIGKILL after `grace_secs` (its daemon, whose parent-death
  signal is SIGKILL, goes with it)."""
  if keeper.poll() is None:
    keeper.terminate()
  try:
    keeper.wait(grace_secs)
  except subprocess.TimeoutExpired:
    keeper.kill()
    keeper.wait()


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
