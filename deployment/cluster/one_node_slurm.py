"""A one-node Slurm on this machine (munged, slurmctld, slurmd), to try the Slurm recipe
(configs/slurm/train.sbatch) before a real cluster; the tests start theirs with it too.

    python -m deployment.cluster.one_node_slurm start --state_dir=/tmp/slurm
    export SLURM_CONF=/tmp/slurm/slurm.conf          # the line `start` prints
    sbatch --ntasks=3 configs/slurm/train.sbatch 1 --dataset_name=digits ...
    python -m deployment.cluster.one_node_slurm stop --state_dir=/tmp/slurm

Needs root and Debian's packages (apt-get install -y slurmctld slurmd slurm-client munge).
Each daemon runs in the foreground under a keeper (deployment.cluster.process_guards, run
under `python -S`) that stops it, and kills what it leaves (slurmstepd, a job's
tasks), when the keeper's owner ends however it ends: `start` leaves a supervisor
(`serve`) owning them until `stop`; a test owns its cluster itself. docs/cluster.md,
"Slurm on one machine", gives the configuration (partitions, preemption, requeue delay).

Exit status (core/errors.py): 0 started, stopped, or nothing to stop; 2 (USAGE) Slurm or
munge not installed (the apt-get command), not root, or one already runs from that
directory; 138 (CLUSTER) a daemon did not start (the logs to read).
"""

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from core import errors
from deployment.cluster.process_guards import (alive, argv_of, start_daemon,
                                               stop_daemon)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ('slurmctld', 'slurmd', 'slurm-client', 'munge')
PROGRAMS = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'scontrol', 'scancel', 'sinfo', 'squeue')
MUNGE_KEY = '/etc/munge/munge.key'
MUNGE_PREFIX = 'slimdeploy-munge-'   # Private munge directories, in the system's tmp.
DAEMONS = ('munged', 'slurmctld', 'slurmd', 'slurmstepd')
TOOL = 'deployment.cluster.one_node_slurm'   # `python -S -m TOOL serve|start|stop`
RESERVED_PORTS = (24000, 24999)   # MpiParams=ports: srun --resv-ports hands these out.
PID_FILE, READY_FILE, LOG_FILE = 'one_node_slurm.pid', 'one_node_slurm.ready', 'one_node_slurm.log'

# 16 CPUs on any machine (config_overrides); no slurmdbd: a jobcomp/filetxt log holds what
# sacct would show. cred_expire is also how long a requeued job waits (120 s by default):
# here it starts about 12 s after its requeue. A job of `urgent` preempts `main`'s, which
# get their --signal at once (preempt_send_user_signal), else a requeue after GraceTime.
SLURM_CONF = """\
ClusterName=slimdeploy-one-node
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket},cred_expire=10
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
SchedulerParameters=sched_interval=2,bf_interval=1
SlurmctldParameters=preempt_send_user_signal
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
MpiDefault=none
MpiParams=ports={ports[0]}-{ports[1]}
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.log
MinJobAge=4
ReturnToService=2
KillWait=30
NodeName={node} NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=main Nodes={node} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=60
PartitionName=urgent Nodes={node} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
"""


def missing():
  """None when Slurm and munge are installed, else one line saying how to install them."""
  absent = [p for p in PROGRAMS if not (shutil.which(p) or shutil.which(p, path='/usr/sbin'))]
  if not absent:
    return None
  return ('Slurm and munge are not installed (no %s): apt-get install -y %s'
          % (', '.join(absent), ' '.join(PACKAGES)))


# ---- The cluster ---------------------------------------------------------------------

def _node_name():
  """This host's short name when it resolves (as on a real cluster), else localhost."""
  host = socket.gethostname().split('.')[0]
  try:
    socket.gethostbyname(host)
    return host
  except OSError:
    return 'localhost'


def _free_port():
  with socket.socket() as probe:
    probe.bind(('127.0.0.1', 0))
    return probe.getsockname()[1]


class OneNodeSlurm:
  """munged + slurmctld + slurmd on this host, state in `state_dir`; a context manager
  that stops all three whatever happens. `env` points Slurm's clients at them."""
  END_CLIENTS = None   # The tests' 'SLURM_CONF': never a user's shells (see `keep`).

  def __init__(self, state_dir):
    self.dir = os.path.abspath(str(state_dir))
    self.node = _node_name()
    self.conf = os.path.join(self.dir, 'slurm.conf')
    self.munge_dir = None   # Made at start: munged cannot enter a root-only state_dir.
    self.daemons = []   # Their keepers (subprocess.Popen), in start order.
    self.env = {k: v for k, v in os.environ.items()   # Clients inside a Slurm job too.
                if not k.startswith(('SLURM_', 'SBATCH_', 'SRUN_'))}
    self.env['SLURM_CONF'] = self.conf

  def __enter__(self):
    try:
      os.makedirs(os.path.join(self.dir, 'state'), exist_ok=True)
      os.makedirs(os.path.join(self.dir, 'spool'), exist_ok=True)
      self.munge_dir = tempfile.mkdtemp(prefix=MUNGE_PREFIX)
      shutil.chown(self.munge_dir, 'munge', 'munge')
      os.chmod(self.munge_dir, 0o711)   # Clients must reach munged's socket.
      munge = os.path.join(self.munge_dir, 'munge')
      with open(self.conf, 'w') as conf:
        conf.write(SLURM_CONF.format(
            host=socket.gethostname().split('.')[0], node=self.node, dir=self.dir,
            ctld_port=_free_port(), slurmd_port=_free_port(), ports=RESERVED_PORTS,
            munge_socket=munge + '.socket'))
      self._start('munged', ['munged', '--foreground', '--socket=%s.socket' % munge,
                             '--pid-file=%s.pid' % munge, '--log-file=%s.log' % munge,
                             '--seed-file=%s.seed' % munge], user='munge')
      self._wait('munged to answer on %s.socket' % munge, lambda: socket.socket(
          socket.AF_UNIX).connect_ex(munge + '.socket') == 0, 30)
      # -f: the configuration in the command line too (the tests' leftover check reads it).
      self._start('slurmctld', ['slurmctld', '-D', '-i', '-f', self.conf],
                  clients_env=self.END_CLIENTS)
      self._start('slurmd', ['slurmd', '-D', '-N', self.node, '-f', self.conf])
      self._wait('the node to be idle', lambda: self._client('sinfo', '-h', '-o%T') == 'idle',
                 60)
    except BaseException:
      self.__exit__()
      raise
    return self

  def _start(self, name, argv, user=None, clients_env=None):
    keeper = start_daemon(argv, os.path.join(self.dir, name + '.out'), self.env, user,
                          clients_env)
    keeper.name = name
    self.daemons.append(keeper)

  def _wait(self, what, condition, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
      ended = ['%s (status %d)' % (k.name, k.returncode) for k in self.daemons
               if k.poll() is not None]
      if ended:
        raise RuntimeError('%s ended\n%s' % (', '.join(ended), self.daemon_logs()))
      if condition():
        return
      time.sleep(0.2)
    raise RuntimeError('waited %d s for %s\n%s' % (timeout, what, self.daemon_logs()))

  def _client(self, *argv):
    """What a Slurm client prints (stripped), whatever its status."""
    return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                          check=False).stdout.strip()

  def daemon_logs(self):
    """The last 3000 characters of every daemon's log, each under its path."""
    paths = [os.path.join(self.dir, n) for n in ('slurmctld.log', 'slurmd.log', 'munged.out',
                                                 'slurmctld.out', 'slurmd.out')]
    if self.munge_dir:
      paths.append(os.path.join(self.munge_dir, 'munge.log'))
    return '\n'.join('--- %s\n%s' % (p, open(p, errors='replace').read()[-3000:])
                     for p in paths if os.path.exists(p))

  def queued(self, job_id=None):
    """True while squeue lists the job (any job when None), completing ones included."""
    return bool(self._client('squeue', '-h', *(['-j', str(job_id)] if job_id else [])))

  def __exit__(self, *exc_info):
    """Cancels every job and waits for them to end (KillWait, 30 s, then their tasks are
    killed), then stops slurmd, slurmctld and munged (SIGTERM to each keeper)."""
    try:
      if len(self.daemons) > 1 and self.daemons[1].poll() is None:   # slurmctld runs.
        self._client('scancel', '--user=' + pwd.getpwuid(os.getuid()).pw_name)
        deadline = time.time() + 45
        while time.time() < deadline and self.queued():
          time.sleep(0.5)
    finally:
      for keeper in reversed(self.daemons):
        stop_daemon(keeper)
      self.daemons = []
      if self.munge_dir:
        shutil.rmtree(self.munge_dir, ignore_errors=True)


# ---- The tool: start, stop, and what they run -------------------------------------------

def running(state_dir):
  """The pid of the supervisor serving `state_dir`, or None."""
  try:
    with open(os.path.join(state_dir, PID_FILE)) as handle:
      pid = int(handle.read())
  except (OSError, ValueError):
    return None
  ours = {TOOL, 'serve', '--state_dir=' + state_dir} <= set(argv_of(pid))
  return pid if ours and alive(pid) else None


def serve(state_dir):
  """What `start` leaves running: the cluster, until SIGTERM, SIGINT or SIGHUP."""
  signals = []
  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda signum, frame: signals.append(signum))
  with open(os.path.join(state_dir, PID_FILE), 'w') as handle:
    handle.write('%d\n' % os.getpid())
  try:
    with OneNodeSlurm(state_dir):
      open(os.path.join(state_dir, READY_FILE), 'w').close()
      while not signals:
        time.sleep(0.5)
      print('%s: stopping (signal %d)' % (time.strftime('%T'), signals[0]), flush=True)
  except RuntimeError as error:   # The daemons' logs, then its one line, last.
    print('%s\nerror: %s' % (error, str(error).splitlines()[0]), flush=True)
    return errors.CLUSTER
  finally:
    for name in (READY_FILE, PID_FILE):
      if os.path.exists(os.path.join(state_dir, name)):
        os.remove(os.path.join(state_dir, name))
  return errors.OK


def start(state_dir, timeout=120):
  """Starts the supervisor and waits until the node is idle; prints SLURM_CONF."""
  problem = missing()
  if problem is None and os.geteuid() != 0:
    problem = ('the one-node Slurm must start as root: slurmd starts each job as its user '
               'and munged runs as the munge user')
  if problem is None and not os.path.exists(MUNGE_KEY):
    problem = ('munge has no key (%s): apt-get install --reinstall munge makes one'
               % MUNGE_KEY)
  if problem is None and running(state_dir):
    problem = ('a one-node Slurm already runs from %s (pid %d): stop it first, '
               'python -m %s stop --state_dir=%s' % (state_dir, running(state_dir), TOOL,
                                                    state_dir))
  if problem:
    errors.print_error(problem)
    return errors.USAGE
  os.makedirs(state_dir, exist_ok=True)
  ready = os.path.join(state_dir, READY_FILE)
  if os.path.exists(ready):
    os.remove(ready)
  with open(os.path.join(state_dir, LOG_FILE), 'ab') as log:
    supervisor = subprocess.Popen(
        [sys.executable, '-S', '-m', TOOL, 'serve', '--state_dir=' + state_dir], cwd=ROOT,
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)   # Outlives this command and its terminal.
  deadline = time.time() + timeout
  while not os.path.exists(ready):
    if supervisor.poll() is not None or time.time() > deadline:
      if supervisor.poll() is None:
        supervisor.terminate()   # Its keepers stop what it had started.
        supervisor.wait()
      with open(os.path.join(state_dir, LOG_FILE), errors='replace') as log:
        last = (log.read().strip().splitlines() or [''])[-1]
      errors.print_error('the one-node Slurm did not start (%s): see %s and the daemons\' '
                         'logs beside it' % (last[len('error: '):] if last.startswith(
                             'error: ') else 'not ready in %d s' % timeout, log.name))
      return errors.CLUSTER
    time.sleep(0.2)
  print('export SLURM_CONF=%s' % os.path.join(state_dir, 'slurm.conf'))
  print('# one-node Slurm up (node %s, 16 CPUs, partitions main and urgent); stop it with: '
        'python -m %s stop --state_dir=%s' % (_node_name(), TOOL, state_dir),
        file=sys.stderr)
  return errors.OK


def stop(state_dir, timeout=120):
  """SIGTERM to the supervisor; waits until it has stopped every job and daemon."""
  pid = running(state_dir)
  if pid is None:
    print('no one-node Slurm runs from %s' % state_dir)
    return errors.OK
  os.kill(pid, signal.SIGTERM)
  deadline = time.time() + timeout
  while alive(pid) and time.time() < deadline:
    time.sleep(0.2)
  if alive(pid):   # Its keepers stop the daemons once it has gone.
    os.kill(pid, signal.SIGKILL)
  print('stopped the one-node Slurm of %s' % state_dir)
  return errors.OK


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -m ' + TOOL, description=(
      'Starts or stops a one-node Slurm (munged, slurmctld, slurmd) on this machine.'))
  parser.add_argument('action', choices=('start', 'stop', 'serve'),
                      help='start or stop (serve: what start leaves running)')
  parser.add_argument('--state_dir', required=True,
                      help='Directory of slurm.conf, state and logs.')
  options = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
  state_dir = os.path.abspath(options.state_dir)
  return {'start': start, 'stop': stop, 'serve': serve}[options.action](state_dir)


if __name__ == '__main__':
  sys.exit(main())
