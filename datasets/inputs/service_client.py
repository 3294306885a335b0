"""A trainer's side of the tf.data service: its input pipeline served by data workers.

    settings = InputSettings(batch_size=32, ..., service=ServiceSettings('host:5050'))
    dataset = distribute_epochs(lambda s: build_image_dataset(split, s, is_training=True),
                                settings)         # batches now come from the data workers

`distribute_epochs` sends one epoch of the pipeline (no repeat, every example batched) to
the dispatcher and reads each epoch as a job of its own ('<job_name> epoch <k>'): the next
epoch starts when every data worker has served its share of this one, so each example
comes once per epoch, whatever the number of data workers; the trainer cuts the batches to
batch_size. Sharding (SHARDINGS): `dynamic`, the dispatcher hands out the shard files (then
their examples) to whichever data worker asks; `files`, worker i of N reads every N-th file
(`shard_hint`; the dispatcher needs its fixed --worker_addresses). The end of an epoch
waits for every data worker the dispatcher ever had: one that dies holds it until it is
back at its address. `DataWorkers` asks the dispatcher which data workers it has and each
whether it answers, for the trainer's log and its time-out line. docs/data_service.md.
"""

import contextlib
import dataclasses
import re
import socket
from typing import Optional

import grpc

from core.errors import ConfigError
from tf_compat import tf
# After tf_compat, which sets TensorFlow up before it is imported. The private reader takes
# a job name that is a tensor (the public one only a string) and how often to ask the
# dispatcher for tasks; op determinism has no public question.
from tensorflow.python.data.experimental.ops import data_service_ops  # pylint: disable=g-direct-tensorflow-import,wrong-import-order
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import,wrong-import-order

__all__ = ['SHARDINGS', 'ServiceSettings', 'distribute_epochs', 'shard_hint',
           'DataWorkers', 'naming_service_errors']

SHARDINGS = ('dynamic', 'files')
_GET_WORKERS = '/tensorflow.data.DispatcherService/GetWorkers'
# How often a reader asks the dispatcher for the tasks of its epoch's job: every epoch
# starts with one such wait (TensorFlow's default, 1 s, paused each epoch a second).
_TASK_REFRESH_MS = 200


@dataclasses.dataclass(frozen=True)
class ServiceSettings:
  """Where a trainer's input comes from: the dispatcher's host:port, one of SHARDINGS, and
  the job's name (each epoch is the job '<job_name> epoch <k>': trainers naming the same
  job share each epoch); `max_outstanding_requests`, the batches this reader may have
  asked for and not yet taken (None: TensorFlow's, which grows while the reader waits;
  the doctor bounds it so that an idle reader stops taking a data worker's time)."""
  address: str
  sharding: str = 'dynamic'
  job_name: str = 'train'
  max_outstanding_requests: Optional[int] = None


def _policy(sharding):
  policies = tf.data.experimental.service.ShardingPolicy
  return {'dynamic': policies.DYNAMIC, 'files': policies.HINT}[sharding]


def distribute_epochs(build, settings, received=None):
  """The batches of `build`'s pipeline made by the data workers of `settings.service`, each
  epoch a job of the dispatcher's ('<job_name> epoch <k>').

  Every data worker runs its share of one epoch and ends; epoch k + 1 starts when all of
  epoch k is read, across every trainer sharing the job. So each example comes once per
  epoch (at most once when a data worker dies with some in hand), epoch after epoch. A
  trainer that starts late, or again, skips the epochs already over and joins the current
  one.

  Args:
    build: InputSettings -> a dataset of batches (every op a TensorFlow op), called once
      with one epoch's settings (`_one_epoch`).
    settings: the InputSettings of the batches wanted: service (a ServiceSettings),
      batch_size, num_epochs (None: forever), drop_remainder, prefetch_batches.
    received: None, or a function of the dataset of batches as the data workers send
      them (the last of each data worker's share of an epoch is short) that returns
      another, applied before they are cut to batch_size: where examples the data workers
      marked can be dropped.

  Returns:
    Batches of settings.batch_size (static when drop_remainder), the first epoch's
    examples, then the second's, and so on; the order within an epoch is the workers'. A
    batch may hold the end of one epoch and the start of the next, as a local pipeline's
    `repeat` before `batch` makes.
  """
  one_epoch = _one_epoch(build, settings)
  batches = _epoch_jobs(one_epoch, settings.service, settings.num_epochs)
  if received is not None:
    batches = received(batches)
  # Cutting copies only the batches that straddle two received ones; the prefetch keeps
  # that copy out of the training step.
  batches = batches.rebatch(settings.batch_size, drop_remainder=settings.drop_remainder)
  return batches.prefetch(settings.prefetch_batches).with_options(one_epoch.options())


def _epoch_jobs(one_epoch, service, num_epochs):
  """`one_epoch` registered with the dispatcher of `service` and read as one job per
  epoch, 'job_name epoch k', k from 0 (`num_epochs` of them; None: forever), flattened."""
  target = 'grpc://' + service.address
  dataset_id = tf.data.experimental.service.register_dataset(target, one_epoch)

  def epoch(index):
    name = tf.strings.join([service.job_name, ' epoch ', tf.strings.as_string(index)])
    return data_service_ops._from_dataset_id(  # pylint: disable=protected-access
        _policy(service.sharding), target, dataset_id, one_epoch.element_spec,
        job_name=name, max_outstanding_requests=service.max_outstanding_requests,
        task_refresh_interval_hint_ms=_TASK_REFRESH_MS)

  # A job per epoch, named by its number. `repeat` after one job makes an iteration per
  # epoch too, but a reader started again was served the epochs already over anew (a
  # second process read 4 whole epochs from a job whose first 2 were over); here they are
  # empty, and flat_map goes on to the next.
  epochs = (tf.data.Dataset.counter() if num_epochs is None
            else tf.data.Dataset.range(num_epochs))
  return epochs.flat_map(epoch)


def _one_epoch(build, settings):
  """`build`'s pipeline of one epoch, every example batched: what the data workers run.

  A data worker starts it afresh every epoch, so a seed would make each epoch repeat the
  one before (order, crops, flips) and it is built unseeded, the graph's seed included:
  the service's order is not repeatable anyway. Under op determinism (--deterministic),
  which refuses unseeded random ops, it keeps its seeds.
  """
  one_epoch = dataclasses.replace(settings, num_epochs=1, drop_remainder=False)
  if tf_config.is_op_determinism_enabled():
    return build(one_epoch)
  graph = tf.get_default_graph()
  graph_seed, graph.seed = graph.seed, None
  try:
    return build(dataclasses.replace(one_epoch, seed=None))
  finally:
    graph.seed = graph_seed


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
    listed = self._listed()
    return None if listed is None else [worker for worker in listed if self._answers(worker)]

  def _listed(self):
    """Sorted addresses of every data worker the dispatcher lists (those gone too), or
    None."""
    with grpc.insecure_channel(self.address) as channel:
      call = channel.unary_unary(_GET_WORKERS, request_serializer=lambda _: b'',
                                 response_deserializer=lambda data: data)
      try:
        response = call(None, timeout=self._timeout)
      except grpc.RpcError:
        return None
    return sorted(info.decode('utf-8', 'replace') for worker in
                  _length_delimited(response, 1) for info in _length_delimited(worker, 1))

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
          'training goes on with %d (%s) until the end of this epoch, which waits for %s '
          'to come back' % (len(workers), ', '.join(workers), ', '.join(gone)) if workers
          else 'none is left: training waits for one until --step_timeout_secs'))
    joined = sorted(set(workers) - set(known))
    if joined:
      lines.append('tf.data service: data worker%s %s joined (%d now)' % (
          's' if len(joined) > 1 else '', ', '.join(joined), len(workers)))
    return lines

  def describe(self):
    """'; the tf.data service at H:P has no data worker ...' for a time-out line, or ''.
    Among the data workers, one the dispatcher lists that does not answer is named: every
    epoch's end waits for it."""
    listed = self._listed()
    if listed is None:
      return '; the tf.data service\'s dispatcher at %s does not answer' % self.address
    workers = [worker for worker in listed if self._answers(worker)]
    if not workers:
      return ('; the tf.data service at %s has no data worker left (start one: python -m '
              'datasets.data_service --role=worker --dispatcher_address=%s)'
              % (self.address, self.address))
    gone = sorted(set(listed) - set(workers))
    if gone:
      return ('; the end of the epoch waits for data worker %s, which the dispatcher at %s '
              'lists and which does not answer (every epoch gives each data worker the '
              'dispatcher ever had a share: start it again at that address)'
              % (', '.join(gone), self.address))
    return ''
