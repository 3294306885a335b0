"""A private network namespace: processes inside reach each other on 127.0.0.1, nobody
outside reaches them.

TensorFlow's gRPC server listens on every interface whatever address the cluster gives
it (grpc_server_lib.cc binds "0.0.0.0:<port>"; `ss -ltn` shows `*:<port>`), has no
option to bind one address, and runs any op for anyone who connects. Inside a fresh
network namespace the only interface is the namespace's own loopback, so "every
interface" means this namespace's 127.0.0.1 and the ports do not exist on the host.

    network = PrivateNetwork.create()     # raises NamespaceUnavailable(reason)
    subprocess.Popen(network.wrap([sys.executable, 'task.py']))
    network.close()

The namespace is held by a small process (`unshare --net`, plus `--user
--map-root-user` when not root) that brings `lo` up and then waits for its stdin to
close: it also ends when its creator dies, even by SIGKILL. Commands enter it with
`nsenter`. `create(hosts_file=...)` also gives it a private mount namespace in which that
file is /etc/hosts, so names of a real cluster (a JobSet's pods) resolve to its loopback
without touching the machine's /etc/hosts. Needs util-linux and a kernel that lets this user create the namespaces
(containers often forbid it: then `create` raises and callers say so).
"""

import os
import shutil
import subprocess
import sys

__all__ = ['PrivateNetwork', 'NamespaceUnavailable']

# Runs inside the namespace: bring the loopback interface up (SIOCSIFFLAGS, IFF_UP), say
# so, then live until stdin closes.
_HOLDER = r'''
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
request = struct.pack('16sH22x', b'lo', 0)
flags = struct.unpack('16sH', fcntl.ioctl(s, 0x8913, request)[:18])[1]
fcntl.ioctl(s, 0x8914, struct.pack('16sH22x', b'lo', flags | 0x1))
print('ready', flush=True)
sys.stdin.read()
'''


class NamespaceUnavailable(RuntimeError):
  """A private network namespace cannot be created here; the message says why."""


class PrivateNetwork:
  """A held network namespace with only a loopback interface. See the module doc."""

  def __init__(self, holder, nsenter_prefix):
    self._holder = holder
    self._prefix = nsenter_prefix

  @property
  def pid(self):
    return self._holder.pid

  @classmethod
  def create(cls, timeout_secs=10.0, hosts_file=None):
    unshare, nsenter = shutil.which('unshare'), shutil.which('nsenter')
    if not unshare or not nsenter:
      raise NamespaceUnavailable('unshare/nsenter (util-linux) not found')
    user = [] if os.geteuid() == 0 else ['--user', '--map-root-user']
    holder_argv = [sys.executable, '-c', _HOLDER]
    if hosts_file:  # The mount namespace is private: the bind is seen only inside.
      holder_argv = ['sh', '-c', 'mount --bind "$0" /etc/hosts && exec "$@"',
                     os.path.abspath(hosts_file)] + holder_argv
    spaces = ['--net', '--mount'] if hosts_file else ['--net']
    holder = subprocess.Popen(
        [unshare] + user + spaces + ['--'] + holder_argv,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
      line = _read_line(holder, timeout_secs)
    except BaseException:
      _end(holder)
      raise
    if line.strip() != 'ready':
      error = _end(holder)
      raise NamespaceUnavailable((error.strip().splitlines() or ['no reason given'])[-1])
    prefix = [nsenter, '--target', str(holder.pid)]
    prefix += ['--user', '--preserve-credentials'] if user else []
    # Entering a mount namespace moves to its root: --wd=. keeps the caller's directory.
    wd = ['--wd=.'] if hosts_file else []
    return cls(holder, prefix + spaces + wd + ['--'])

  def wrap(self, argv):
    """`argv` run inside the namespace (nsenter execs it: same pid, same signals)."""
    return self._prefix + list(argv)

  def close(self):
    _end(self._holder)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()


def _read_line(process, timeout_secs):
  """First stdout line of `process`, '' if it exits or stays silent for timeout_secs."""
  import selectors  # pylint: disable=import-outside-toplevel
  with selectors.DefaultSelector() as selector:
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(timeout_secs):
      return ''
  return process.stdout.readline()


def _end(process):
  """Ends the holder (closing its stdin); returns what it wrote to stderr."""
  try:
    _, error = process.communicate(timeout=5)
  except subprocess.TimeoutExpired:
    process.kill()
    _, error = process.communicate()
  return error or ''
