"""The tf.data service's servers: one dispatcher and N data workers, each a process.

    python -m datasets.data_service --role=dispatcher --port=5050 --work_dir=/runs/x/data_service
    python -m datasets.data_service --role=worker --dispatcher_address=host:5050

The dispatcher keeps a journal in --work_dir (fault-tolerant mode), so one restarted on the
same port and work dir resumes its jobs and trainers carry on; a data worker without a
heartbeat for --worker_timeout_secs counts as missing. A data worker registers with the
dispatcher and runs the part of a trainer's input pipeline the trainer sends (the graph of
its tf.data pipeline: everything in it must be a TensorFlow op, no Python function). Both
serve until SIGTERM or SIGINT. Under Slurm (--addressing=slurm) role, port and addresses
come from the service's srun step. docs/data_service.md tells the whole story.
"""

import dataclasses
import os
import signal
import socket
import threading
from typing import Tuple

from absl import logging

from core.errors import ConfigError, require
from core.params import param
from deployment.cluster import slurm_env
from deployment.cluster.task_spec import ClusterError
from datasets.inputs import jpeg_windows
from tf_compat import tf

__all__ = ['ServerConfig', 'check_server_config', 'serve', 'with_addressing', 'ROLES',
           'ADDRESSINGS']

ROLES = ('dispatcher', 'worker')
ADDRESSINGS = ('flags', 'slurm')
_PLACE = ('role', 'port', 'dispatcher_address', 'worker_address')  # What slurm addressing sets.
_POLL_SECS = 0.5  # How often a server checks for a stop request and its workers.


@dataclasses.dataclass(frozen=True)
class ServerConfig:
  """One tf.data service server; each field is a flag of `python -m datasets.data_service`."""
  # Server.
  role: str = param('', 'dispatcher (one per job) or worker (data workers, any number).')
  port: int = param(0, 'Port to listen on; the dispatcher needs one (trainers and workers '
                    'find it there, and a restarted dispatcher must come back on it); a '
                    'worker: 0 = any free port.')
  addressing: str = param('flags', 'flags: --role, --port and the addresses as given; '
                          'slurm: from the service\'s srun step (configs/slurm/train.sbatch): '
                          'task 0 the dispatcher, the others data workers advertising their '
                          'node, ports from deployment/cluster/slurm_env.py.')
  # Dispatcher.
  address_file: str = param('', 'dispatcher: once ready, write the host:port trainers reach '
                            'it by to this file (for a script that starts them after it).')
  work_dir: str = param('', 'dispatcher: directory of its journal (fault-tolerant mode), so '
                        'a dispatcher restarted with the same one resumes its jobs.')
  worker_addresses: Tuple[str, ...] = param(
      (), 'dispatcher: the fixed list of data workers (host:port, as each advertises it); '
      'needed only by trainers with --data_service_sharding=files.')
  worker_timeout_secs: float = param(
      10.0, 'dispatcher: a data worker without a heartbeat for this long counts as '
      'missing (TensorFlow\'s worker_timeout_ms).')
  # Worker.
  dispatcher_address: str = param('', 'worker: the dispatcher, host:port.')
  worker_address: str = param('', 'worker: the address it advertises to trainers '
                              '(host:port); unset = localhost and its port.')


def _check_address(flag, value):
  host, _, port = value.rpartition(':')
  require(host and port.isdigit() and 0 < int(port) < 65536,
          '--%s=%r must be host:port' % (flag, value))


def with_addressing(config, environ):
  """(`config` with role, port and addresses read from `environ` (os.environ) where
  --addressing says so, the host:port others reach the server by or None = unknown).
  Under slurm (deployment.cluster.slurm_env.service_from_environ) a data worker drops the
  dispatcher's flags: every task of the step gets the same command."""
  require(config.addressing in ADDRESSINGS, '--addressing=%r must be one of %s'
          % (config.addressing, ', '.join(ADDRESSINGS)))
  if config.addressing == 'flags':
    return config, None
  defaults = ServerConfig()
  given = [name for name in _PLACE if getattr(config, name) != getattr(defaults, name)]
  require(not given, '--addressing=slurm sets --%s from srun\'s environment: drop --%s'
          % (', --'.join(_PLACE), given and given[0]))
  try:
    task = slurm_env.service_from_environ(environ)
  except ClusterError as error:
    raise ConfigError(str(error)) from None
  if task.role == 'dispatcher':
    return dataclasses.replace(config, role=task.role, port=task.port), task.address
  return dataclasses.replace(config, role=task.role, port=task.port, work_dir='',
                             address_file='', worker_addresses=(),
                             dispatcher_address=task.dispatcher_address,
                             worker_address=task.address), task.address


def check_server_config(config):
  """Raises ConfigError (one line) for a flag the role cannot use."""
  require(config.addressing in ADDRESSINGS, '--addressing=%r must be one of %s'
          % (config.addressing, ', '.join(ADDRESSINGS)))
  require(config.role in ROLES, '--role=%r must be one of %s' % (config.role, ', '.join(ROLES)))
  require(0 <= config.port < 65536, '--port=%d must be in 0..65535' % config.port)
  if config.role == 'dispatcher':
    require(config.port > 0, '--port=0: the dispatcher needs a fixed port (trainers and '
            'data workers find it there; a restarted dispatcher must come back on it)')
    require(config.work_dir, '--work_dir is required for --role=dispatcher: its journal, '
            'so that a restarted dispatcher resumes')
    require(config.worker_timeout_secs > 0, '--worker_timeout_secs=%r must be > 0'
            % config.worker_timeout_secs)
    require(not config.dispatcher_address and not config.worker_address,
            '--dispatcher_address and --worker_address are for --role=worker')
    for address in config.worker_addresses:
      _check_address('worker_addresses', address)
  else:
    require(config.dispatcher_address, '--dispatcher_address is required for --role=worker '
            '(host:port of the dispatcher)')
    _check_address('dispatcher_address', config.dispatcher_address)
    if config.worker_address:
      _check_address('worker_address', config.worker_address)
    require(not config.work_dir and not config.worker_addresses and not config.address_file,
            '--work_dir, --worker_addresses and --address_file are for --role=dispatcher')


def _service():
  # The servers are TF2 API only (tf.compat.v1 has no DispatchServer).
  return tf.compat.v2.data.experimental.service


def _start_dispatcher(config):
  service = _service()
  return service.DispatchServer(service.DispatcherConfig(
      port=config.port, work_dir=config.work_dir, fault_tolerant_mode=True,
      worker_addresses=list(config.worker_addresses) or None,
      worker_timeout_ms=int(config.worker_timeout_secs * 1000)))


def _start_worker(config):
  service = _service()
  settings = dict(dispatcher_address=config.dispatcher_address, port=config.port)
  if config.worker_address:
    settings['worker_address'] = config.worker_address
  return service.WorkerServer(service.WorkerConfig(**settings))


def _start(config):
  """The started server; a port in use (or another start failure) is a ConfigError."""
  try:
    return (_start_dispatcher if config.role == 'dispatcher' else _start_worker)(config)
  except (tf.errors.OpError, RuntimeError) as error:
    raise ConfigError('--role=%s --port=%d: the server does not start: %s' % (
        config.role, config.port, str(error).splitlines()[0])) from None


def _watch_workers(server, stop_event):
  """The dispatcher's log: a line whenever its count of data workers changes."""
  count = None
  while not stop_event.wait(_POLL_SECS):
    now = server._server.num_workers()  # pylint: disable=protected-access
    if now != count:
      logging.info('Dispatcher: %d data worker%s registered', now, '' if now == 1 else 's')
      count = now


def _write_address(path, address):
  """Writes `address` to `path` whole or not at all (a reader polls for the file)."""
  temporary = '%s.%d' % (path, os.getpid())
  with open(temporary, 'w') as handle:
    handle.write(address + '\n')
  os.replace(temporary, path)
  logging.info('Dispatcher address %s written to %s', address, path)


def _register_clip_op(role):
  """Data workers run the graphs trainers send, which they did not build, and the
  dispatcher reads them (distributed epochs split their files there): the clip pipeline's
  op is registered before either serves. Without the library they serve image pipelines,
  and say why a clip pipeline would fail."""
  if jpeg_windows.is_built():
    jpeg_windows.load()
  else:
    logging.warning('%s is not built here: this %s cannot serve clip pipelines '
                    '(`make jpeg-op` builds it)', jpeg_windows.LIBRARY_PATH, role)


def serve(config, stop_event=None, address=None):
  """Checks `config`, starts its server, logs one 'ready' line and serves until
  `stop_event` is set (default: until SIGTERM or SIGINT, unless ignored). Returns 0. `address`: the
  host:port others reach it by, for --address_file (None: this host's name, its port)."""
  check_server_config(config)
  if stop_event is None:
    stop_event = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
      # One ignored by the parent stays ignored (as nohup's): under Slurm, scancel's SIGTERM
      # must leave the service serving while the chief finishes its step and saves.
      if signal.getsignal(signum) != signal.SIG_IGN:
        signal.signal(signum, lambda *_: stop_event.set())
  _register_clip_op(config.role)
  server = _start(config)
  port = server._server.bound_port()  # pylint: disable=protected-access
  if config.role == 'dispatcher':
    logging.info('tf.data service dispatcher ready on port %d (journal in %s)', port,
                 config.work_dir)
    if config.address_file:
      _write_address(config.address_file,
                     address or '%s:%d' % (socket.gethostname(), port))
    _watch_workers(server, stop_event)
  else:
    logging.info('tf.data service data worker ready on port %d, registered with %s', port,
                 config.dispatcher_address)
    while not stop_event.wait(_POLL_SECS):
      pass
  logging.info('Stopping the %s (a signal)', config.role)
  server._stop()  # pylint: disable=protected-access
  return 0
