"""A trainer's side of the tf.data service: its input pipeline served by data workers.

    service = ServiceSettings(address='host:5050', sharding='dynamic', job_name='digits-train')
    dataset = distribute(pipeline, service)   # elements now come from the data workers

`distribute` sends the pipeline's graph to the dispatcher; every data worker runs it and
the trainer reads their elements. Sharding (SHARDINGS):
  dynamic  the dispatcher hands the pipeline's source (the shard files, then the videos or
           images in them) out piece by piece to whichever data worker asks, so over an
           epoch every video is read once across all data workers and all trainers sharing
           the job (at most once when a data worker dies with pieces in hand);
  files    each data worker reads its own shard files (`shard_hint` marks the file list:
           worker i of N reads every N-th file); needs the dispatcher's fixed
           --worker_addresses, and a data worker that dies takes its files with it.
`DataWorkers` asks the dispatcher which data workers it has (its GetWorkers RPC) and each
of them whether it answers, so the trainer's log says when one leaves and its time-out
line when none is left.
"""

import contextlib
import dataclasses
import re
import socket
from typing import Optional

import grpc

from core.errors import ConfigError
from tf_compat import tf

__all__ = ['SHARDINGS', 'ServiceSettings', 'distribute', 'shard_hint', 'DataWorkers',
           'naming_service_errors']

SHARDINGS = ('dynamic', 'files')
_GET_WORKERS = '/tensorflow.data.DispatcherService/GetWorkers'


@dataclasses.dataclass(frozen=True)
class ServiceSettings:
  """Where a trainer's input comes from: the dispatcher's host:port, one of SHARDINGS, and
  the job's name (trainers naming the same job share its stream: with dynamic sharding
  they share each epoch); `max_outstanding_requests`, the batches this reader may have
  asked for and not yet taken (None: TensorFlow's, which grows while the reader waits;
  the doctor bounds it so that an idle reader stops taking a data worker's time)."""
  address: str
  sharding: str = 'dynamic'
  job_name: str = 'train'
  max_outstanding_requests: Optional[int] = None


def _policy(sharding):
  policies = tf.data.experimental.service.ShardingPolicy
  return {'dynamic': policies.DYNAMIC, 'files': policies.HINT}[sharding]


def distribute(dataset, service):
  """`dataset` (every op a TensorFlow op) run by the data workers of `service`, a
  ServiceSettings; the elements are the same, their order is the workers'."""
  return dataset.apply(tf.data.experimental.service.distribute(
      processing_mode=_policy(service.sharding), service='grpc://' + service.address,
      job_name=service.job_name, max_outstanding_requests=service.max_outstanding_requests))


def shard_hint(files, service):
  """The dataset of shard file names `files`, marked so that with files sharding each data
  worker keeps its own (worker i of N: every N-th from i); unchanged otherwise."""
  if service is None or service.sharding != 'files':
    return files
  hint = tf.data.experimental.SHARD_HINT
  return files.shard(hint, hint)


@contextlib.contextmanager
def naming_service_errors(service):
  """Around the session runs that read from `service` (a ServiceSettings or None): files
  sharding refused by a dispatcher without a fixed list of data workers becomes one
  ConfigError line (TensorFlow raises NotFoundError at the first step)."""
  try:
    yield
  except tf.errors.NotFoundError as error:
    refused = re.search(r'Worker (\S+) is not in the workers list', str(error))
    if service is None or refused is None:
      raise
    raise ConfigError(
        '--data_service_sharding=files: the dispatcher at %s has no fixed list of data '
        'workers holding %s; start it with --worker_addresses=<each data worker\'s '
        '--worker_address>, or use --data_service_sharding=dynamic'
        % (service.address, refused.group(1))) from None


def _varint(data, position):
  value = shift = 0
  while True:
    byte = data[position]
    position += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if not byte & 0x80:
      return value, position


def _length_delimited(data, field):
  """The bytes of every length-delimited `field` of a serialized protocol buffer."""
  values, position = [], 0
  while position < len(data):
    key, position = _varint(data, position)
    wire_type = key & 7
    if wire_type == 2:
      size, position = _varint(data, position)
      if key >> 3 == field:
        values.append(data[position:position + size])
      position += size
    elif wire_type == 0:
      _, position = _varint(data, position)
    else:  # 64-bit (1) or 32-bit (5) fixed fields.
      position += 8 if wire_type == 1 else 4
  return values


class DataWorkers:
  """The data workers the dispatcher at `address` lists, and what changed between calls.

  TensorFlow's Python API cannot ask a remote dispatcher; its GetWorkers RPC (an empty
  request; a response of repeated WorkerInfo, field 1, whose field 1 is the address) is
  called here directly, so nothing beyond grpc, which TensorFlow installs, is needed.
  """

  def __init__(self, address, timeout_secs=1.0):
    self.address = address
    self._timeout = timeout_secs
    self._known = None
    self._answered = True

  def list(self):
    """Sorted addresses of the registered data workers that answer; None when the
    dispatcher does not answer within the timeout."""
    with grpc.insecure_channel(self.address) as channel:
      call = channel.unary_unary(_GET_WORKERS, request_serializer=lambda _: b'',
                                 response_deserializer=lambda data: data)
      try:
        response = call(None, timeout=self._timeout)
      except grpc.RpcError:
        return None
    listed = sorted(info.decode('utf-8', 'replace') for worker in
                    _length_delimited(response, 1) for info in _length_delimited(worker, 1))
    return [worker for worker in listed if self._answers(worker)]

  def _answers(self, worker):
    # The dispatcher keeps listing a worker that died (it only stops giving it work), so
    # each is asked for a TCP connection: refused at once when its process is gone (a gRPC
    # channel would retry until its timeout, between two training steps).
    host, _, port = worker.rpartition(':')
    try:
      with socket.create_connection((host, int(port)), timeout=self._timeout):
        return True
    except (OSError, ValueError):
      return False

  def changes(self):
    """Lines for the log about what changed since the previous call (none the first time
    the workers are seen, except when there are none): a worker gone or joined, the
    dispatcher no longer answering or answering again."""
    workers = self.list()
    answered, self._answered = self._answered, workers is not None
    if workers is None:
      return [] if not answered else [
          'tf.data service: the dispatcher at %s does not answer; training goes on with '
          'the data workers it had' % self.address]
    known, self._known = self._known, workers
    if not answered:
      return ['tf.data service: the dispatcher at %s answers again; data workers: %s' % (
          self.address, ', '.join(workers) or 'none')]
    if known is None:
      return ([] if workers else ['tf.data service: the dispatcher at %s has no data '
                                  'worker yet' % self.address])
    lines = []
    gone = sorted(set(known) - set(workers))
    if gone:
      lines.append('tf.data service: data worker%s %s gone; %s' % (
          's' if len(gone) > 1 else '', ', '.join(gone),
          'training goes on with %d (%s)' % (len(workers), ', '.join(workers)) if workers
          else 'none is left: training waits for one until --step_timeout_secs'))
    joined = sorted(set(workers) - set(known))
    if joined:
      lines.append('tf.data service: data worker%s %s joined (%d now)' % (
          's' if len(joined) > 1 else '', ', '.join(joined), len(workers)))
    return lines

  def describe(self):
    """'; the tf.data service at H:P has no data worker ...' for a time-out line, or ''."""
    workers = self.list()
    if workers is None:
      return '; the tf.data service\'s dispatcher at %s does not answer' % self.address
    if not workers:
      return ('; the tf.data service at %s has no data worker left (start one: python -m '
              'datasets.data_service --role=worker --dispatcher_address=%s)'
              % (self.address, self.address))
    return ''
