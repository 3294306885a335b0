"""Entry scripts the tests start, forked from a process that imported TensorFlow already.

Every `python train_image_classifier.py ...` a test starts (and every task a LocalCluster
starts in a test) pays 2.3-2.6 CPU-seconds importing TensorFlow before its first line runs:
about 450 of the suite's 1500 CPU-seconds on the 2-core machine it is timed on. Here one
server process per pytest process (multiprocessing's fork server) imports the project's
modules once, and each start forks it: the child takes the command's argv, working
directory, environment, stdin/stdout/stderr, session, network namespace and `preexec_fn`,
and runs the command as the interpreter would (a script as module `__main__` with its
absolute `__file__`, `-m` through runpy, sys.path as a fresh start's) to its exit status.

The test sees what `subprocess.Popen` gives: a real process with its own pid that signals
reach, an exit status (negative for a signal), pipes, `communicate`, `wait`, `poll`. What is
not the same as a fresh start is the start itself: the modules are imported already, so
nothing a start prints or reads at import time happens again. Commands that depend on it
start fresh, as `subprocess.Popen` starts them:
- any command that is not `python script.py ...` or `python -m module ...` (interpreter
  options, `-c`, other programs), or that asks for what this does not do (pass_fds, shell,
  user, ..., a `preexec_fn` that cannot be pickled to the server, such as a lambda);
- a command whose environment differs from the server's in a variable read at import or
  at the interpreter's start (`IMPORT_TIME_ENV`): the tests that strip TF_CPP_MIN_LOG_LEVEL
  to check that an entry hides TensorFlow's start-up notices get real starts;
- a command whose sys.path would not reach the project's root (a script elsewhere without
  PYTHONPATH): a fresh start could not import the modules the server holds;
- every start in a test marked `fresh_start` (conftest.py).
A forked entry's own `python <entry> ...` starts (demo.py's stages) are forked by the same
server, under the same rules: in the child subprocess.Popen is this module's, and it reaches
the server with the address and descriptors multiprocessing's fork server gave the child.
Such a start is the server's child, not the entry's: the entry's exit leaves it running, as
it leaves a real child, and `wait`, `poll` and signals reach it by pid. The entry's own
multiprocessing gets a fork server of its own, as a fresh start's.
A forked entry's sessions run without grappler unless SLIMDEPLOY_TESTS_GRAPPLER=1 is in its
environment (tests/graph_optimizer.py); a fresh start keeps it.
`nsenter --target PID --net -- python ...` (LocalCluster's private network) is entered with
setns(2) in the child, as nsenter does before it execs; other nsenter forms start fresh.
"""

import atexit
import builtins
import ctypes
import dataclasses
import importlib.machinery
import io
import itertools
import multiprocessing
import os
import pickle
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from multiprocessing import forkserver, process, reduction, resource_tracker, spawn
from typing import Optional

# tf_compat's os.environ defaults are set before any test copies os.environ.
import tf_compat  # noqa: F401
from tests import graph_optimizer

REAL_POPEN = subprocess.Popen
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imported once by the server: what the entry scripts import (not the entries themselves,
# whose module code must run in each child).
PRELOAD = ['tests.prestarted_server', 'tf_compat', 'tests.prestarted', 'training.train',
           'training.doctor.diagnosis', 'evaluation.run', 'serving.export_model',
           'serving.predict_video',
           'deployment.cluster.launch_local', 'datasets.inputs.service_client',
           'datasets.conversion.convert_images', 'nets.nets_factory']

# Read while the preloaded modules are imported or by the interpreter as it starts.
IMPORT_TIME_ENV = ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'TF_CPP_MAX_VLOG_LEVEL',
                   'TF_CPP_VMODULE', 'TF_ENABLE_ONEDNN_OPTS', 'TF_USE_LEGACY_KERAS',
                   'PYTHONWARNINGS', 'PYTHONUNBUFFERED', 'PYTHONHASHSEED', 'PYTHONDEVMODE',
                   'PYTHONFAULTHANDLER', 'PYTHONMALLOC', 'PYTHONOPTIMIZE', 'PYTHONHOME',
                   'PYTHONSAFEPATH', 'PYTHONNOUSERSITE', 'PYTHONIOENCODING', 'PYTHONUTF8',
                   'LANG', 'LC_ALL', 'LC_CTYPE', 'LD_PRELOAD', 'LD_LIBRARY_PATH')
_SUPPORTED = {'stdin', 'stdout', 'stderr', 'cwd', 'env', 'text', 'universal_newlines',
              'encoding', 'errors', 'start_new_session', 'preexec_fn', 'close_fds', 'bufsize'}
_CLONE_NEWNET = 0x40000000
_server_env = None
# In the fork server (which imports this module), its own main-process object: the child
# takes it back from multiprocessing's bootstrap, which made the child a "ForkServerProcess".
_MAIN_PROCESS = multiprocessing.current_process()
_server_lock = threading.Lock()
# In a forked child: the server it was forked from (for its Forked starts) and the script's
# own fork server (for its multiprocessing), chosen per thread by `_starting.forked`.
_test_server = None
_own_server = None


class _Starting(threading.local):
  forked = False  # This thread is starting a Forked process.


_starting = _Starting()


@dataclasses.dataclass
class _Request:
  """What the child needs: picklable, the three descriptors passed with SCM_RIGHTS."""
  module: bool
  target: str
  argv: list
  cwd: str
  env: dict
  fds: tuple
  new_session: bool
  network_pid: Optional[int]
  preexec_fn: object


class _PassedFd:
  """A descriptor of this process that arrives in the child as an int (multiprocessing's
  DupFd, which the fork server sends with the start)."""

  def __init__(self, fd):
    self.fd = fd

  def __reduce__(self):
    return _detach, (reduction.DupFd(self.fd),)


def _detach(dup):
  return dup.detach()


def parse(args):
  """(module?, target, argv after it, network namespace holder's pid or None) of a command
  this can fork, else None."""
  if isinstance(args, (str, bytes)) or not all(
      isinstance(a, (str, os.PathLike)) for a in args):
    return None
  args, network_pid = [os.fspath(a) for a in args], None
  if args and os.path.basename(str(args[0])) == 'nsenter':
    if len(args) < 5 or args[1] != '--target' or args[3:5] != ['--net', '--']:
      return None
    network_pid, args = int(args[2]), args[5:]
  if len(args) < 2 or args[0] != sys.executable:
    return None
  if args[1] == '-m':
    return (True, args[2], args[3:], network_pid) if len(args) > 2 else None
  if args[1].startswith('-'):
    return None
  return False, args[1], args[2:], network_pid


def _context():
  """The fork server's context; the first call sets its preload and starts it."""
  global _server_env
  context = multiprocessing.get_context('forkserver')
  with _server_lock:
    if _server_env is None:
      context.set_forkserver_preload(PRELOAD)
      from multiprocessing import forkserver  # pylint: disable=import-outside-toplevel
      forkserver.ensure_running()  # Spawned now, with the environment noted here.
      _server_env = {name: os.environ.get(name) for name in IMPORT_TIME_ENV}
  return context


def start_server():
  """Starts the fork server now, from this thread: call it from the main thread, whose end
  (the process's) is the server's end (its parent-death signal follows the thread that
  started it)."""
  _context()


def forkable(args, kwargs):
  """The parsed command if this can start it forked, else None (see the module doc)."""
  parsed = parse(args)
  if (parsed is None or set(kwargs) - _SUPPORTED or kwargs.get('close_fds') is False or
      not _picklable(kwargs.get('preexec_fn'))):
    return None
  _context()
  env = os.environ if kwargs.get('env') is None else kwargs['env']
  if any(env.get(name) != _server_env[name] for name in IMPORT_TIME_ENV):
    return None
  cwd = os.path.abspath(kwargs.get('cwd') or os.getcwd())
  if ROOT not in _first_paths(parsed[0], parsed[1], cwd, env):
    return None  # A fresh start could not import the project's modules the server holds.
  return parsed


def _picklable(value):
  try:
    pickle.dumps(value)
  except (pickle.PicklingError, AttributeError, TypeError):
    return False
  return True


def Popen(args, **kwargs):  # pylint: disable=invalid-name
  """subprocess.Popen's stand-in: a forked start where `forkable`, a real one otherwise."""
  parsed = (None if os.environ.get('SLIMDEPLOY_TESTS_FRESH_STARTS') == '1' else
            forkable(args, kwargs))
  if parsed is None:
    return REAL_POPEN(args, **kwargs)
  return Forked(args, parsed, **kwargs)


class _Reader(threading.Thread):
  """Reads one pipe to its end (communicate's half for stdout or stderr)."""

  def __init__(self, pipe):
    super().__init__(daemon=True)
    self.pipe, self.data = pipe, None

  def run(self):
    self.data = self.pipe.read()
    self.pipe.close()


class Forked:
  """The subset of subprocess.Popen that tests and LocalCluster use, for a forked start."""

  def __init__(self, args, parsed, stdin=None, stdout=None, stderr=None, cwd=None, env=None,
               text=False, universal_newlines=False, encoding=None, errors=None,
               start_new_session=False, preexec_fn=None, close_fds=True, bufsize=-1):
    del close_fds, bufsize  # Only 0, 1 and 2 are passed, as close_fds does.
    self.args, self.returncode, self._readers = args, None, None
    self.text_mode = bool(text or universal_newlines or encoding or errors)
    self._encoding, self._errors = encoding, errors
    theirs = []  # Opened here for the child: closed once it has them.
    child_in, self.stdin = self._descriptor(stdin, 0, False, theirs)
    child_out, self.stdout = self._descriptor(stdout, 1, True, theirs)
    child_err, self.stderr = ((child_out, None) if stderr == subprocess.STDOUT else
                              self._descriptor(stderr, 2, True, theirs))
    module, target, argv, network_pid = parsed
    request = _Request(module, target, argv, os.path.abspath(cwd or os.getcwd()),
                       dict(os.environ if env is None else env),
                       tuple(_PassedFd(fd) for fd in (child_in, child_out, child_err)),
                       start_new_session, network_pid, preexec_fn)
    self._process = _context().Process(target=_run_in_child, args=(request,), daemon=True)
    _starting.forked = True
    try:
      self._process.start()
    finally:
      _starting.forked = False
      for fd in theirs:
        os.close(fd)
    if _test_server is not None:
      # Started by a forked entry: not one of its multiprocessing children, whose daemons
      # its exit would end; a real child outlives it.
      process._children.discard(self._process)  # pylint: disable=protected-access
    self.pid = self._process.pid

  def _descriptor(self, spec, default, child_writes, theirs):
    """(the descriptor the child gets for `spec`: None, PIPE, DEVNULL, a file or an fd;
    this side's pipe end for PIPE, else None)."""
    if spec is None:
      return default, None
    if spec == subprocess.DEVNULL:
      theirs.append(os.open(os.devnull, os.O_RDWR))
      return theirs[-1], None
    if spec == subprocess.PIPE:
      read_fd, write_fd = os.pipe()
      mine, child = (read_fd, write_fd) if child_writes else (write_fd, read_fd)
      theirs.append(child)
      return child, self._wrap(mine, child_writes)
    return (spec if isinstance(spec, int) else spec.fileno()), None

  def _wrap(self, fd, readable):
    pipe = open(fd, 'rb' if readable else 'wb')  # pylint: disable=consider-using-with
    if self.text_mode:
      pipe = io.TextIOWrapper(pipe, encoding=self._encoding, errors=self._errors,
                              write_through=True)
    return pipe

  def poll(self):
    if self.returncode is None:
      self.returncode = self._process.exitcode
    return self.returncode

  def wait(self, timeout=None):
    self._process.join(timeout)
    if self.poll() is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, signum):
    if self.poll() is None:
      os.kill(self.pid, signum)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def communicate(self, input=None, timeout=None):  # pylint: disable=redefined-builtin
    """Like Popen.communicate: may be called again after a timeout."""
    if self._readers is None:
      self._readers = [_Reader(p) for p in (self.stdout, self.stderr) if p is not None]
      for reader in self._readers:
        reader.start()
      if self.stdin is not None:
        threading.Thread(target=_write_and_close, args=(self.stdin, input),
                         daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout
    left = lambda: None if deadline is None else max(0.0, deadline - time.monotonic())
    for reader in self._readers:
      reader.join(left())
      if reader.is_alive():
        raise subprocess.TimeoutExpired(self.args, timeout)
    self.wait(left())
    data = {id(r.pipe): r.data for r in self._readers}
    return tuple(data.get(id(p)) if p is not None else None
                 for p in (self.stdout, self.stderr))

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    if self._readers is None:  # Otherwise communicate's threads own the pipes.
      for pipe in (self.stdout, self.stderr, self.stdin):
        if pipe is not None and not pipe.closed:
          pipe.close()
    self.wait()


def _write_and_close(pipe, data):
  try:
    if data:
      pipe.write(data)
  except BrokenPipeError:
    pass
  finally:
    try:
      pipe.close()
    except BrokenPipeError:
      pass


# ---- In the forked child ----------------------------------------------------------------

class _ServerOfThisFork:
  """The fork server this child was forked from, as its client: the server's address, the
  descriptor that keeps it alive and the pytest process's resource tracker, all handed to
  the child by multiprocessing's fork server (the server runs as long as that pytest
  process). A resource tracker of the child's own would hold the entry's output open."""

  def __init__(self, address, alive_fd, tracker_fd):
    self.address, self.alive_fd, self.tracker_fd = address, alive_fd, tracker_fd

  def connect_to_new_process(self, fds):
    """What multiprocessing's fork server takes to fork a child: (status_r, data_w)."""
    parent_r, child_w = os.pipe()
    child_r, parent_w = os.pipe()
    try:
      with socket.socket(socket.AF_UNIX) as client:
        client.connect(self.address)
        reduction.sendfds(client, [child_r, child_w, self.alive_fd, self.tracker_fd] +
                          list(fds))
    except BaseException:
      os.close(parent_r)
      os.close(parent_w)
      raise
    finally:
      os.close(child_r)
      os.close(child_w)
    return parent_r, parent_w


def _connect_to_new_process(fds):
  """multiprocessing.forkserver's request in a forked child: to the server it was forked
  from for this thread's Forked start, to the script's own fork server otherwise."""
  server = _test_server if _starting.forked else _own_server
  return server.connect_to_new_process(fds)


_PREPARATION_DATA = spawn.get_preparation_data


def _preparation_data(name):
  """multiprocessing's preparation data in a forked child, without the script's main module
  for a Forked start: multiprocessing would run it again in the new process (as
  `__mp_main__`), which a fresh start of another command never does."""
  data = _PREPARATION_DATA(name)
  if _starting.forked:
    data.pop('init_main_from_name', None)
    data.pop('init_main_from_path', None)
  return data


def _become_main():
  """multiprocessing's view of this process as a fresh interpreter's: the main process, no
  parent, no children, no start method chosen, no fork server or resource tracker yet
  (Forked starts still reach the server this child was forked from)."""
  # pylint: disable=import-outside-toplevel,protected-access
  global _test_server, _own_server
  from multiprocessing import context
  _test_server = _ServerOfThisFork(forkserver._forkserver._forkserver_address,
                                   forkserver._forkserver._forkserver_alive_fd,
                                   resource_tracker._resource_tracker._fd)
  process._current_process = _MAIN_PROCESS
  _MAIN_PROCESS.authkey = os.urandom(32)
  process._parent_process = None
  process._children = set()
  process._process_counter = itertools.count(1)
  context._default_context._actual_context = None
  server = _own_server = forkserver._forkserver = forkserver.ForkServer()
  for name in ('ensure_running', 'get_inherited_fds', 'set_forkserver_preload'):
    setattr(forkserver, name, getattr(server, name))
  forkserver.connect_to_new_process = _connect_to_new_process
  spawn.get_preparation_data = _preparation_data
  tracker = resource_tracker._resource_tracker = resource_tracker.ResourceTracker()
  for name in ('ensure_running', 'register', 'unregister', 'getfd'):
    setattr(resource_tracker, name, getattr(tracker, name))


def _standard_streams():
  """sys.stdin/stdout/stderr made for descriptors 0-2 as the interpreter makes them."""
  encoding = sys.__stdout__.encoding  # The server's: the same variables chose it.

  def text(fd, mode, errors, line_buffering):
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == 'r' else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors,
                            line_buffering=line_buffering)
  sys.stdin = sys.__stdin__ = text(0, 'r', 'strict', False)
  sys.stdout = sys.__stdout__ = text(1, 'w', 'strict', os.isatty(1))
  sys.stderr = sys.__stderr__ = text(2, 'w', 'backslashreplace', True)


def _enter_network(pid):
  """setns(2) into the network namespace of `pid`, as `nsenter --target PID --net`."""
  fd = os.open('/proc/%d/ns/net' % pid, os.O_RDONLY)
  try:
    if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
      error = ctypes.get_errno()
      raise OSError(error, 'nsenter: setns to the network of pid %d: %s' % (
          pid, os.strerror(error)))
  finally:
    os.close(fd)


def _first_paths(module, target, cwd, env):
  """The head of sys.path that `python script.py` or `python -m module` starts with in
  `cwd` with `env`: the script's directory (or cwd), then PYTHONPATH's entries."""
  first = (cwd if module else
           os.path.dirname(os.path.realpath(os.path.join(cwd, target))))
  extra = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
  return [first] + [os.path.abspath(os.path.join(cwd, p)) for p in extra]


def _python_path(request):
  """sys.path as a fresh start of the request would have it."""
  prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
  installed = [p for p in sys.path
               if any(p == x or p.startswith(x + os.sep) for x in prefixes)]
  return _first_paths(request.module, request.target, request.cwd, request.env) + installed


def _exit_status(code):
  if code is None:
    return 0
  if isinstance(code, int):
    return code & 0xff
  print(code, file=sys.stderr)
  return 1


def _run_in_child(request):
  """The child's whole life: set up as the command's own process, run, exit."""
  global _server_env
  _become_main()
  fds = request.fds
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
  for fd in set(fds) - {0, 1, 2}:
    os.close(fd)
  inherited = (sys.stdout, sys.stderr)
  _standard_streams()
  os.chdir(request.cwd)
  _server_env = {name: os.environ.get(name) for name in IMPORT_TIME_ENV}  # The server's.
  os.environ.clear()
  os.environ.update(request.env)
  if request.new_session:
    os.setsid()
  if request.network_pid is not None:
    _enter_network(request.network_pid)
  if request.preexec_fn is not None:
    request.preexec_fn()
  if 'numpy' in sys.modules:
    sys.modules['numpy'].random.seed()  # A fresh process's global generator is unseeded.
  sys.path[:] = _python_path(request)
  graph_optimizer.install()
  subprocess.Popen = Popen  # The entry's own entries are forked too.
  code = _run(request)
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr) + inherited:
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  os._exit(code)  # pylint: disable=protected-access


def _run_script(path):
  """The script as the interpreter runs `python path`: module __main__, absolute __file__."""
  main = types.ModuleType('__main__')
  main.__file__, main.__builtins__, main.__cached__ = path, builtins, None
  main.__loader__ = importlib.machinery.SourceFileLoader('__main__', path)
  sys.modules['__main__'] = main
  with open(path, 'rb') as source:
    code = compile(source.read(), path, 'exec', dont_inherit=True)
  exec(code, main.__dict__)  # pylint: disable=exec-used


def _run(request):
  """The script's exit status, as the interpreter reports an uncaught exit or exception."""
  sys.argv = [request.target] + request.argv  # runpy puts the module's path first.
  try:
    if request.module:
      runpy.run_module(request.target, run_name='__main__', alter_sys=True)
    else:
      _run_script(os.path.abspath(request.target))
    return 0
  except SystemExit as stop:
    return _exit_status(stop.code)
  except KeyboardInterrupt:
    sys.excepthook(*sys.exc_info())
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    return 130
  except BaseException:  # pylint: disable=broad-except
    sys.excepthook(*sys.exc_info())
    return 1
