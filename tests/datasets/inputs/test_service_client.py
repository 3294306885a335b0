"""Tests for datasets/inputs/service_client.py against a real tf.data service.

  * `distribute_epochs` on the image pipeline (48 numbered images, batch 2) through 1, 2
    and 3 data workers, each `data_service.serve` in a thread of the test's process
    (seconds): every image exactly once in each epoch's 48 with either sharding, each
    epoch in an order of its own although the trainer is seeded, a late reader skipping
    the epochs already over, and `received` dropping examples before the batches are cut;
  * the same, counted on the shard indexes' video ids, through a dispatcher and two data
    workers that are each `python -m datasets.data_service` (the tool the docs cite), whose
    SIGTERM ends them with status 0; the expected ids are read from the shards with
    tests/damaged_data.py's own reader;
  * the dispatcher's worker list as DataWorkers reads it, and what it says of one gone.
"""

import contextlib
import dataclasses
import glob
import io
import os
import threading

import numpy as np
import pytest
from google.protobuf import descriptor_pb2
from PIL import Image

from datasets.formats import image_records, shards, video_records
from datasets.formats.dataset_split import DatasetSplit
from datasets.inputs import clip_reader, image_input, service_client, data_service
from datasets.inputs.input_settings import InputSettings
from tests import damaged_data, video_testdata
from tests.data_service import DataService, free_port, wait_for
from tf_compat import tf

IMAGES, SHARDS, BATCH, EPOCHS = 48, 4, 2, 2  # 2 epochs: each its own order, both whole.


def test_length_delimited_reads_repeated_messages_past_other_fields():
  # FileDescriptorSet: field 1 repeated FileDescriptorProto, whose field 1 is a string;
  # field 10 (public_dependency) puts varints between them.
  message = descriptor_pb2.FileDescriptorSet(file=[
      descriptor_pb2.FileDescriptorProto(name='host-a:1', package='p', public_dependency=[300]),
      descriptor_pb2.FileDescriptorProto(name='host-b:22')]).SerializeToString()
  names = [value for item in service_client._length_delimited(message, 1)  # pylint: disable=protected-access
           for value in service_client._length_delimited(item, 1)]  # pylint: disable=protected-access
  assert names == [b'host-a:1', b'host-b:22']


def test_a_dispatcher_that_does_not_answer_is_said_once():
  workers = service_client.DataWorkers('localhost:%d' % free_port(), timeout_secs=0.5)
  assert workers.list() is None
  assert len(workers.changes()) == 1 and workers.changes() == []
  assert 'does not answer' in workers.describe()


def _video_ids(dataset_dir, split):
  ids = []
  for shard in sorted(glob.glob(os.path.join(dataset_dir, '%s-*-of-*' % split))):
    if not shard.endswith(shards.INDEX_SUFFIX):
      ids.extend(damaged_data.read_ids(shard))
  return ids


def _read(dataset, take, limit):
  """`take(element)` (a list) of each element of `dataset`, for `limit` elements or to its
  end."""
  values = []
  with tf.Graph().as_default():
    # A seeded trainer's graph: the data workers' pipeline is unseeded all the same.
    tf.set_random_seed(1)
    element = tf.data.make_one_shot_iterator(dataset()).get_next()
    with tf.Session() as sess:
      try:
        for _ in range(limit):
          values.extend(take(sess.run(element)))
      except tf.errors.OutOfRangeError:
        pass
  return values


def _epochs(values, size):
  """`values` cut into consecutive epochs of `size`, each sorted."""
  return [sorted(values[start:start + size]) for start in range(0, len(values), size)]


def _served_ids(dataset_dir, split, service, epochs):
  """The video ids of every element the data workers send, as the trainer's records."""
  files = sorted(f for f in glob.glob(os.path.join(dataset_dir, '%s-*-of-*' % split))
                 if not f.endswith(shards.INDEX_SUFFIX))

  def build(settings):
    entries = clip_reader.video_entries(files, settings, True, 8)
    ids = entries.map(lambda shard, entry: video_records.parse_index_entry(entry)['video_id'])
    return ids.batch(settings.batch_size, drop_remainder=settings.drop_remainder)

  settings = InputSettings(batch_size=2, image_size=1, num_readers=2, num_epochs=epochs,
                           service=service)
  return _read(lambda: service_client.distribute_epochs(build, settings),
               lambda batch: [v.decode() for v in batch], 10000)


@pytest.mark.cluster
@pytest.mark.slow
def test_each_video_once_per_epoch_with_either_sharding(tmp_path, tmp_path_factory):
  directory = video_testdata.converted(tmp_path_factory, 'rgb')
  expected = sorted(_video_ids(directory, 'test'))
  assert len(expected) == len(set(expected)) > 2
  with DataService(tmp_path, worker_ports=[free_port(), free_port()]) as service:
    assert service.live_workers() == sorted(w.address for w in service.workers)
    for sharding in service_client.SHARDINGS:
      settings = service_client.ServiceSettings(service.address, sharding, 'ids ' + sharding)
      assert _epochs(_served_ids(directory, 'test', settings, 2), len(expected)) == [
          expected, expected], sharding
    # A launcher ends the servers with SIGTERM: each exits 0.
    assert [service.stop(p) for p in service.workers + [service.dispatcher]] == [0, 0, 0]


@pytest.fixture(scope='module')
def numbered_images(tmp_path_factory):
  """A split of IMAGES blank 4x4 images in SHARDS shards, each labelled with its number."""
  directory = tmp_path_factory.mktemp('numbered')
  png = io.BytesIO()
  Image.fromarray(np.zeros((4, 4), np.uint8)).save(png, 'PNG')
  for shard in range(SHARDS):
    with tf.io.TFRecordWriter(str(directory / ('train-%05d-of-%05d' % (shard, SHARDS)))) as out:
      for number in range(shard, IMAGES, SHARDS):
        out.write(image_records.image_to_example(
            png.getvalue(), 'png', number, 4, 4, 1).SerializeToString())
  return DatasetSplit(name='numbered', split_name='train', dataset_dir=str(directory),
                      file_pattern=str(directory / 'train-*'), num_samples=IMAGES,
                      num_classes=IMAGES, labels_to_names={}, num_channels=1)


@contextlib.contextmanager
def _threaded_service(directory, num_workers):
  """-> the address of a dispatcher (with the fixed list of workers files sharding needs)
  and `num_workers` data workers, each `data_service.serve` in a thread of this
  process; every one of them stopped on the way out, however the test ends."""
  address = 'localhost:%d' % free_port()
  workers = sorted('localhost:%d' % free_port() for _ in range(num_workers))
  configs = [data_service.ServerConfig(
      role='dispatcher', port=int(address.split(':')[1]), work_dir=str(directory),
      worker_addresses=tuple(workers))] + [data_service.ServerConfig(
          role='worker', port=int(worker.split(':')[1]), dispatcher_address=address,
          worker_address=worker) for worker in workers]
  stop = threading.Event()
  threads = [threading.Thread(target=data_service.serve, args=(config, stop))
             for config in configs]
  dispatcher = service_client.DataWorkers(address)
  try:
    # The dispatcher first: a data worker's start holds Python's lock until the
    # dispatcher takes its registration, which a dispatcher still starting never would.
    threads[0].start()
    wait_for(lambda: dispatcher.list() is not None, 60, 'the dispatcher to start')
    for thread in threads[1:]:
      thread.start()
    wait_for(lambda: dispatcher.list() == workers, 60,
             'the dispatcher to list %d data workers' % num_workers)
    yield address
  finally:
    stop.set()
    for thread in threads:
      if thread.is_alive():
        thread.join()


@pytest.fixture(scope='module', params=[1, 2, 3], ids=lambda n: '%d_data_workers' % n)
def threaded_service(request, tmp_path_factory):
  with _threaded_service(tmp_path_factory.mktemp('journal'), request.param) as address:
    yield address


def _image_settings(address, sharding, job, **overrides):
  """Training's settings, seeded, reading the job `job` (its epochs are shared by every
  reader naming it)."""
  return InputSettings(
      batch_size=BATCH, image_size=4, preprocessing_name='cifarnet', num_readers=2,
      num_parallel_calls=1, shuffle_buffer_size=16, seed=7, **overrides,
      service=service_client.ServiceSettings(address, sharding, job))


def _labels(split, settings, received=None):
  """The labels of EPOCHS epochs of training batches (fewer if the stream ends)."""
  build = lambda settings: image_input.build_image_dataset(split, settings, is_training=True)
  return _read(lambda: service_client.distribute_epochs(build, settings, received),
               lambda batch: batch[1].tolist(), EPOCHS * IMAGES // BATCH)


@pytest.mark.parametrize('sharding', service_client.SHARDINGS)
def test_every_image_once_per_epoch_through_the_service(numbered_images, threaded_service,
                                                        sharding):
  settings = _image_settings(threaded_service, sharding, 'epochs ' + sharding)
  labels = _labels(numbered_images, settings)
  assert _epochs(labels, IMAGES) == [list(range(IMAGES))] * EPOCHS
  # Each epoch is a new pass of the data workers, in an order of its own.
  assert len({tuple(labels[start:start + IMAGES]) for start in range(0, len(labels), IMAGES)}
             ) == EPOCHS
  # A reader that comes once those epochs are over (a trainer started again) skips them.
  assert _labels(numbered_images, dataclasses.replace(settings, num_epochs=EPOCHS)) == []


def test_received_batches_are_cut_to_the_batch_size_after(numbered_images, threaded_service):
  def without_multiples_of_3(batches):
    return batches.map(lambda images, labels: (tf.boolean_mask(images, labels % 3 > 0),
                                               tf.boolean_mask(labels, labels % 3 > 0)))

  settings = _image_settings(threaded_service, 'dynamic', 'received', num_epochs=EPOCHS)
  labels = _labels(numbered_images, settings, received=without_multiples_of_3)
  kept = [n for n in range(IMAGES) if n % 3]
  assert _epochs(labels, len(kept)) == [kept] * EPOCHS


def test_a_data_worker_gone_is_named_as_what_the_epoch_waits_for(monkeypatch):
  workers = service_client.DataWorkers('dispatcher:5050')
  monkeypatch.setattr(workers, '_listed', lambda: ['h:1', 'h:2'])
  answering = {'h:1', 'h:2'}
  monkeypatch.setattr(workers, '_answers', lambda worker: worker in answering)
  assert workers.changes() == [] and workers.describe() == ''
  answering.remove('h:1')
  assert workers.changes() == [
      'tf.data service: data worker h:1 gone; training goes on with 1 (h:2) until the end '
      'of this epoch, which waits for h:1 to come back']
  assert workers.describe().startswith(
      '; the end of the epoch waits for data worker h:1, which the dispatcher at '
      'dispatcher:5050 lists and which does not answer')
  answering.clear()
  assert 'has no data worker left' in workers.describe()
