"""Processes that end with whoever started them: the guards of one_node_slurm's daemons and
of every process the tests start.

  die_with_parent   a `preexec_fn`: the child gets a signal when its starter ends
                    (PR_SET_PDEATHSIG), however it ends;
  keep / keeper_command / start_daemon / stop_daemon
                    a daemon in the foreground under a keeper (`python -S -m
                    deployment.cluster.process_guards keep --owner=PID -- argv`): a child
                    subreaper that stops the daemon, and kills what it leaves, when its
                    owner ends;
  alive, argv_of, is_keeper
                    what the guards (and tests/leftovers.py) read of /proc.
The standard library only: a keeper runs without site-packages, never a fork of a
TensorFlow process.
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

KEEPER = 'deployment.cluster.process_guards'   # `python -S -m KEEPER keep ...`
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36   # linux/prctl.h
# The repository root, three levels above this file: a keeper's working directory.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- What the guards read of /proc ---------------------------------------------------

def _stat(pid):
  """(state, parent pid) of `pid`, or None once it has ended."""
  try:
    with open('/proc/%d/stat' % pid) as stat:
      fields = stat.read().rsplit(')', 1)[1].split()
    return fields[0], int(fields[1])
  except (OSError, IndexError, ValueError):
    return None


def argv_of(pid):
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
    if is_keeper(argv_of(pid)):
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


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -S -m ' + KEEPER, description=(
      'Runs a command under a keeper owned by --owner (see the module doc).'))
  parser.add_argument('action', choices=('keep',))
  parser.add_argument('--owner', type=int, required=True)
  parser.add_argument('--user')
  parser.add_argument('--grace_secs', type=float, default=10.0)
  parser.add_argument('--clients_env')
  argv = sys.argv[1:] if argv is None else list(argv)
  split = argv.index('--') if '--' in argv else len(argv)   # The daemon's argv after it.
  options, command = parser.parse_args(argv[:split]), argv[split + 1:]
  if not command:
    parser.error('keep needs a command after --')
  return keep(command, options.owner, options.user, options.grace_secs, options.clients_env)


if __name__ == '__main__':
  sys.exit(main())
