"""Tests for datasets/inputs/service_client.py against a real tf.data service (a
dispatcher and two data workers, each `python -m datasets.data_service`): the shard
indexes' video ids, read through `distribute` as the trainer reads them, arrive exactly
once per epoch with either sharding; the dispatcher's worker list as DataWorkers reads it.
The expected ids are read from the shards with tests/damaged_data.py's own reader."""

import collections
import glob
import os

import pytest
from google.protobuf import descriptor_pb2

from datasets.formats import shards, video_records
from datasets.inputs import clip_reader, service_client
from tests import damaged_data, video_testdata
from tests.data_service import DataService, free_port
from tf_compat import tf


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


def _served_ids(dataset_dir, split, service, epochs):
  """The video ids of every element the data workers send, as the trainer's records."""
  files = sorted(f for f in glob.glob(os.path.join(dataset_dir, '%s-*-of-*' % split))
                 if not f.endswith(shards.INDEX_SUFFIX))
  with tf.Graph().as_default():
    entries = clip_reader.video_entries(files, True, 2, 8, None, service).repeat(epochs)
    ids = entries.map(lambda shard, entry: video_records.parse_index_entry(entry)['video_id'])
    get_next = tf.data.make_one_shot_iterator(service_client.distribute(
        ids.batch(2), service)).get_next()
    served = []
    with tf.Session() as sess:
      try:
        while True:
          served.extend(v.decode() for v in sess.run(get_next))
      except tf.errors.OutOfRangeError:
        return collections.Counter(served)


@pytest.mark.cluster
@pytest.mark.slow
def test_each_video_once_per_epoch_with_either_sharding(tmp_path, tmp_path_factory):
  directory = video_testdata.converted(tmp_path_factory, 'rgb')
  expected = _video_ids(directory, 'test')
  assert len(expected) == len(set(expected)) > 2
  with DataService(tmp_path, worker_ports=[free_port(), free_port()]) as service:
    assert service.live_workers() == sorted(w.address for w in service.workers)
    dynamic = service_client.ServiceSettings(service.address, 'dynamic', 'ids-dynamic')
    assert _served_ids(directory, 'test', dynamic, 2) == {v: 2 for v in expected}
    files = service_client.ServiceSettings(service.address, 'files', 'ids-files')
    assert _served_ids(directory, 'test', files, 1) == {v: 1 for v in expected}
    # A launcher ends the servers with SIGTERM: each exits 0.
    assert [service.stop(p) for p in service.workers + [service.dispatcher]] == [0, 0, 0]
