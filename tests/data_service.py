"""A real tf.data service for tests: a dispatcher and data workers, one process each.

    with DataService(tmp_path, num_workers=2) as service:
      config = TrainConfig(..., data_service_address=service.address)
      service.kill_worker(0)          # SIGKILL, as a machine that dies
      service.restart_dispatcher()    # same port and journal

Each server is `python -m datasets.data_service` (the tool the docs cite), logging to
<directory>/<name>.log; start-up waits for every 'ready' line and for the dispatcher to
list every worker. Everything still running is killed on exit, a failed start's too, and
every server dies with the process that started it however that ends (its parent-death
signal, tests/leftovers.py's `die_with_parent`).
"""

import functools
import os
import re
import signal
import socket
import subprocess
import sys
import time

from datasets.inputs.service_client import DataWorkers
from tests import leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = 'ready on port'


def free_port():
  with socket.socket() as probe:
    probe.bind(('127.0.0.1', 0))
    return probe.getsockname()[1]


def wait_for(predicate, timeout, what):
  deadline = time.monotonic() + timeout
  while not predicate():
    if time.monotonic() > deadline:
      raise AssertionError('timed out after %g s waiting for %s' % (timeout, what))
    time.sleep(0.1)


class DataService:
  """A dispatcher on a free port (journal in <directory>/work) and `num_workers` workers."""

  def __init__(self, directory, num_workers=1, worker_timeout_secs=2.0, worker_ports=None):
    self.directory = str(directory)
    self.port = free_port()
    self.address = 'localhost:%d' % self.port
    self._worker_timeout = worker_timeout_secs
    self._worker_ports = worker_ports or [0] * num_workers
    self.dispatcher = None
    self.workers = []
    self._starts = 0

  def _start(self, name, *flags):
    self._starts += 1
    log = os.path.join(self.directory, '%s-%d.log' % (name, self._starts))
    with open(log, 'w') as handle:
      process = subprocess.Popen(
          [sys.executable, '-m', 'datasets.data_service'] + list(flags), cwd=ROOT,
          stdout=handle, stderr=subprocess.STDOUT,
          preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid()))
    process.log = log
    process.name = name
    return process

  def wait_ready(self, process):
    """Until `process` logs its ready line (AssertionError with its log if it ends); then
    `process.address` is where it listens."""
    wait_for(lambda: READY in self.log(process) or process.poll() is not None, 120,
             '%s to start' % process.name)
    if process.poll() is not None:
      raise AssertionError('%s ended with %s:\n%s' % (process.name, process.returncode,
                                                       self.log(process)))
    process.address = 'localhost:' + re.search(READY + r' (\d+)', self.log(process)).group(1)

  @staticmethod
  def log(process):
    with open(process.log) as handle:
      return handle.read()

  def start_dispatcher(self):
    extra = (['--worker_addresses=' + ','.join('localhost:%d' % p for p in self._worker_ports)]
             if all(self._worker_ports) else [])
    self.dispatcher = self._start(
        'dispatcher', '--role=dispatcher', '--port=%d' % self.port,
        '--work_dir=' + os.path.join(self.directory, 'work'),
        '--worker_timeout_secs=%g' % self._worker_timeout, *extra)

  def start_worker(self, port=0):
    flags = ['--role=worker', '--dispatcher_address=' + self.address, '--port=%d' % port]
    if port:
      flags.append('--worker_address=localhost:%d' % port)
    self.workers.append(self._start('worker', *flags))

  def live_workers(self):
    return DataWorkers(self.address).list() or []

  def __enter__(self):
    # Started together (workers retry until the dispatcher answers): each process spends
    # seconds importing TensorFlow.
    os.makedirs(self.directory, exist_ok=True)
    try:
      self.start_dispatcher()
      for port in self._worker_ports:
        self.start_worker(port)
      for process in [self.dispatcher] + self.workers:
        self.wait_ready(process)
      wait_for(lambda: len(self.live_workers()) == len(self.workers), 60,
               'the dispatcher to list %d workers' % len(self.workers))
    except BaseException:
      self.__exit__()
      raise
    return self

  def kill_worker(self, index):
    self.workers[index].kill()
    self.workers[index].wait()

  def restart_dispatcher(self):
    self.dispatcher.kill()
    self.dispatcher.wait()
    self.start_dispatcher()
    self.wait_ready(self.dispatcher)

  def stop(self, process):
    """SIGTERM, as a launcher ends a server: -> its exit status."""
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)

  def __exit__(self, *exc_info):
    for process in self.workers + [self.dispatcher]:
      if process is not None and process.poll() is None:
        process.kill()
        process.wait()
