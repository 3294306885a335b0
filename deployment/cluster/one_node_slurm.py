"""A one-node Slurm on this machine (munged, slurmctld, slurmd), to try the Slurm recipe
(configs/slurm/train.sbatch) before a real cluster; the tests start theirs with it too.

    python -m deployment.cluster.one_node_slurm start --state_dir=/tmp/slurm
    export SLURM_CONF=/tmp/slurm/slurm.conf          # the line `start` prints
    sbatch --ntasks=3 configs/slurm/train.sbatch 1 --dataset_name=digits ...
    python -m deployment.cluster.one_node_slurm stop --state_dir=/tmp/slurm

Needs root and Debian's packages (apt-get install -y slurmctld slurmd slurm-client munge).
Each daemon runs in the foreground under a keeper (`keep`: this module under `python -S`,
the standard library only) that stops it, and kills what it leaves (slurmstepd, a job's
tasks), when the keeper's owner ends however it ends: `start` leaves a supervisor
(`serve`) owning them until `stop`; a test owns its cluster itself. docs/cluster.md,
"Slurm on one machine", gives the configuration (partitions, preemption, requeue delay).

Exit status (core/errors.py): 0 started, stopped, or nothing to stop; 2 (USAGE) Slurm or
munge not installed (the apt-get command), not root, or one already runs from that
directory; 138 (CLUSTER) a daemon did not start (the logs to read).
"""

import argparse
import ctypes
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ('slurmctld', 'slurmd', 'slurm-client', 'munge')
PROGRAMS = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'scontrol', 'scancel', 'sinfo', 'squeue')
MUNGE_KEY = '/etc/munge/munge.key'
MUNGE_PREFIX = 'slimdeploy-munge-'   # Private munge directories, in the system's tmp.
DAEMONS = ('munged', 'slurmctld', 'slurmd', 'slurmstepd')
KEEPER = 'deployment.cluster.one_node_slurm'   # `python -S -m KEEPER keep ...`
RESERVED_PORTS = (24000, 24999)   # MpiParams=ports: srun --resv-ports hands these out.
PID_FILE, READY_FILE, LOG_FILE = 'one_node_slurm.pid', 'one_node_slurm.ready', 'one_node_slurm.log'
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36

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


# ---- What the guards read of /proc ---------------------------------------------------

def _stat(pid):
  """(state, parent pid) of `pid`, or None once it has ended."""
  try:
    with open('/proc/%d/stat' % pid) as stat:
      fields = stat.read().rsplit(')', 1)[1].split()
    return fields[0], int(fields[1])
  except (OSError, IndexError, ValueError):
    return None


def _argv(pid):
  """The command line of `pid` ([] once it has ended)."""
  try:
    with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
      return [a.decode(errors='replace') for a in cmdline.read().split(b'\0')[:-1]]
  except OSError:
    return []


def _environ(pid, name):
  try:
    with open('/proc/%d/environ' % pid, 'rb') as environ:
      pairs = environ.read().decode(errors='replace').split('\0')
  except OSError:
    return None
  return dict(p.split('=', 1) for p in pairs if '=' in p).get(name)


def _pids():
  return [int(entry) for entry in os.listdir('/proc') if entry.isdigit()]


def alive(pid):
  """True while `pid` runs (a zombie does not)."""
  stat = _stat(pid)
  return stat is not None and stat[0] not in ('Z', 'X')


def is_keeper(argv):
  """True for a keeper's command line (`python -S -m KEEPER keep ...`)."""
  return any(argv[i:i + 3] == ['-m', KEEPER, 'keep'] for i in range(len(argv)))


def _kept(pid):
  """True when `pid` is a keeper or runs under one."""
  while pid > 1 and _stat(pid):
    if is_keeper(_argv(pid)):
      return True
    pid = _stat(pid)[1]
  return False


# ---- The guards: a child that dies with its parent, and the keeper ---------------------

def _prctl(option, value):
  if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
    error = ctypes.get_errno()
    raise OSError(error, 'prctl(%d): %s' % (option, os.strerror(error)))


def die_with_parent(owner=None, signum=signal.SIGKILL):
  """A `preexec_fn` (picklable): the child gets `signum` when the thread that started it
  ends, whatever ended it (PR_SET_PDEATHSIG; a fork()ed child does not inherit it, so it
  holds only for a program that stays in the foreground). `owner`, the pid that asked for
  the start: if it ended before the setting was made, the child exits at once."""
  _prctl(_PR_SET_PDEATHSIG, signum)
  if os.getppid() == 1 or (owner is not None and not alive(owner)):
    os._exit(1)  # pylint: disable=protected-access


def keeper_command(argv, owner=None, user=None, grace_secs=10.0, clients_env=None):
  """The argv that runs `argv` under a keeper owned by `owner` (this process by default):
  a fresh interpreter without site-packages (-S), never a fork of a TensorFlow process."""
  command = [sys.executable, '-S', '-m', KEEPER, 'keep',
             '--owner=%d' % (os.getpid() if owner is None else owner),
             '--grace_secs=%g' % grace_secs]
  command += ['--user=%s' % user] if user else []
  command += ['--clients_env=%s' % clients_env] if clients_env else []
  return command + ['--'] + list(argv)


def _end_everything_below():
  """SIGKILL to every child (adopted orphans too, whose own children become ours as they
  die and are killed in the next round), until none is left."""
  me = os.getpid()
  while True:
    for pid in _pids():
      if (_stat(pid) or ('', 0))[1] == me:
        try:
          os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
          pass
    try:
      os.waitpid(-1, 0)
    except ChildProcessError:
      return


def keep(argv, owner, user=None, grace_secs=10.0, clients_env=None):
  """Runs `argv` as a child that dies with this process, which is a child subreaper (what
  the daemon leaves becomes ours). A SIGTERM, SIGINT or SIGHUP, or the owner's end, stops
  it: SIGTERM, SIGKILL after `grace_secs`; then everything left under us is killed, and
  the processes no keeper runs whose `clients_env` variable has our value (slurmctld's,
  SLURM_CONF: an `sbatch --wait` of a gone controller polls forever). -> its status."""
  _prctl(_PR_SET_CHILD_SUBREAPER, 1)
  stop = []
  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda signum, frame: stop.append(signum))
  _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
  if os.getppid() != owner:
    return 1   # The owner ended before the guard was set: start nothing.
  extra = dict(user=user, group=user, extra_groups=[]) if user else {}
  daemon = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
                            **extra)
  status, deadline = None, None
  while status is None:
    # os.kill, not Popen's methods: they would reap the daemon out of the loop below.
    if (stop or os.getppid() != owner) and deadline is None:
      os.kill(daemon.pid, signal.SIGTERM)
      deadline = time.monotonic() + grace_secs
    elif deadline is not None and time.monotonic() > deadline:
      os.kill(daemon.pid, signal.SIGKILL)
    while True:   # Reap what ended: the daemon, and orphans it left that we adopted.
      try:
        pid, wait_status = os.waitpid(-1, os.WNOHANG)
      except ChildProcessError:
        pid = 0
      if pid == 0:
        break
      if pid == daemon.pid:
        status = daemon.returncode = os.waitstatus_to_exitcode(wait_status)
    time.sleep(0.1)
  _end_everything_below()
  value = os.environ.get(clients_env) if clients_env else None
  for pid in _pids() if value else ():
    if pid != os.getpid() and _environ(pid, clients_env) == value and not _kept(pid):
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
  return 128 - status if status < 0 else status


def start_daemon(argv, out_path, env, user=None, clients_env=None):
  """-> the keeper (subprocess.Popen) running `argv` (as `user`) for this process, in a
  session of its own (a terminal's Ctrl-C reaches the owner, which stops it), its output
  appended to `out_path`. Stop it with `stop_daemon`."""
  with open(out_path, 'ab') as out:
    return subprocess.Popen(
        keeper_command(argv, user=user, grace_secs=10, clients_env=clients_env), cwd=ROOT,
        env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True)


def stop_daemon(keeper, grace_secs=20):
  """SIGTERM to a keeper; SIGKILL after `grace_secs` (its daemon goes with it)."""
  if keeper.poll() is None:
    keeper.terminate()
  try:
    keeper.wait(grace_secs)
  except subprocess.TimeoutExpired:
    keeper.kill()
    keeper.wait()


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
  ours = {KEEPER, 'serve', '--state_dir=' + state_dir} <= set(_argv(pid))
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
               'python -m %s stop --state_dir=%s' % (state_dir, running(state_dir), KEEPER,
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
        [sys.executable, '-S', '-m', KEEPER, 'serve', '--state_dir=' + state_dir], cwd=ROOT,
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
        'python -m %s stop --state_dir=%s' % (_node_name(), KEEPER, state_dir),
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
  parser = argparse.ArgumentParser(prog='python -m ' + KEEPER, description=(
      'Starts or stops a one-node Slurm (munged, slurmctld, slurmd) on this machine.'))
  parser.add_argument('action', choices=('start', 'stop', 'serve', 'keep'),
                      help='start or stop (serve and keep: what they run)')
  parser.add_argument('--state_dir', help='Directory of slurm.conf, state and logs.')
  parser.add_argument('--owner', type=int, help=argparse.SUPPRESS)
  parser.add_argument('--user', help=argparse.SUPPRESS)
  parser.add_argument('--grace_secs', type=float, default=10.0, help=argparse.SUPPRESS)
  parser.add_argument('--clients_env', help=argparse.SUPPRESS)
  argv = sys.argv[1:] if argv is None else list(argv)
  split = argv.index('--') if '--' in argv else len(argv)   # A keeper's daemon after it.
  options, command = parser.parse_args(argv[:split]), argv[split + 1:]
  if options.action == 'keep':
    if not command or options.owner is None:
      parser.error('keep needs --owner=PID and a command after --')
    return keep(command, options.owner, options.user, options.grace_secs,
                options.clients_env)
  if not options.state_dir or command:
    parser.error('%s takes --state_dir=DIR and nothing else' % options.action)
  state_dir = os.path.abspath(options.state_dir)
  return {'start': start, 'stop': stop, 'serve': serve}[options.action](state_dir)


if __name__ == '__main__':
  sys.exit(main())
