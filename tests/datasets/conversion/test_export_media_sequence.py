"""`python -m datasets.export_media_sequence`: the exported records read with the field's
key names, written out here as MediaPipe's MediaSequence and DMVR spell them, and decoded
the way MediaPipe's Kinetics reader decodes them (flow = (pixel / 255 - 0.5) * 2 * 20).
Exports run in this process; the tool itself is started once, on records it refuses."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from core import errors
from datasets.formats import damaged_shards
from datasets.conversion.export_media_sequence import (MediaSequenceExport,
                                                       export_media_sequence, summary_line)
from tests import damaged_data, entries, video_testdata as vt
from tf_compat import tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# The field's keys (mediapipe/util/sequence/media_sequence.py; DMVR's label text).
IMAGE = 'image/encoded'
FLOW = 'FORWARD_FLOW/image/encoded'
CONTEXT = {'example/id': tf.io.FixedLenFeature([], tf.string),
           'clip/media_id': tf.io.FixedLenFeature([], tf.string),
           'clip/label/index': tf.io.FixedLenFeature([], tf.int64),
           'clip/label/string': tf.io.FixedLenFeature([], tf.string),
           'clip/label/text': tf.io.FixedLenFeature([], tf.string)}


def _read_exported(directory, split, key):
  """{video id: (label, class name, frames uint8 [T, H, W, 3], timestamps)}, in graph."""
  paths = sorted(tf.io.gfile.glob(os.path.join(directory, '%s-*-of-*' % split)))
  out = {}
  with tf.Graph().as_default(), tf.Session() as sess:
    serialized = tf.placeholder(tf.string, [])
    prefix = key[:-len(IMAGE)]
    context, lists = tf.io.parse_single_sequence_example(
        serialized, context_features=CONTEXT, sequence_features={
            key: tf.io.FixedLenSequenceFeature([], tf.string),
            prefix + 'image/timestamp': tf.io.FixedLenSequenceFeature([], tf.int64)})
    # Decoded as Pillow decodes (libjpeg's accurate DCT), so that frames compare exactly.
    images = tf.map_fn(lambda jpeg: tf.image.decode_jpeg(jpeg, dct_method='INTEGER_ACCURATE'),
                       lists[key], fn_output_signature=tf.uint8)
    for path in paths:
      for record in tf.compat.v1.io.tf_record_iterator(path):
        got = sess.run((context, images, lists[prefix + 'image/timestamp']),
                       {serialized: record})
        assert got[0]['example/id'] == got[0]['clip/media_id']
        assert got[0]['clip/label/string'] == got[0]['clip/label/text']
        out[got[0]['example/id'].decode()] = (got[0]['clip/label/index'],
                                              got[0]['clip/label/string'].decode(),
                                              got[1], got[2])
  return out


def _labels(dataset_dir):
  with open(os.path.join(dataset_dir, 'labels.txt')) as handle:
    return dict(line.strip().split(':', 1) for line in handle)


def test_rgb_export_keeps_every_jpeg_under_the_fields_keys(tmp_path, tmp_path_factory):
  source = vt.converted(tmp_path_factory, 'rgb')
  summary = export_media_sequence(MediaSequenceExport(dataset_dir=source,
                                                      output_dir=str(tmp_path)))
  with open(os.path.join(source, 'dataset_info.json')) as handle:
    assert summary['splits'] == json.load(handle)['splits']
  names = _labels(source)
  for split in ('train', 'test'):
    exported = _read_exported(str(tmp_path), split, IMAGE)
    reference = vt.read_records(source, split)
    assert sorted(exported) == sorted(reference)
    for video_id, (label, name, frames, stamps) in exported.items():
      assert label == reference[video_id][0] and name == names[str(label)]
      np.testing.assert_array_equal(frames, reference[video_id][1])  # the same JPEGs
      np.testing.assert_array_equal(stamps, np.round(np.arange(len(frames)) * 1e6 / 25))
  assert open(tmp_path / 'labels.txt').read() == open(os.path.join(source, 'labels.txt')).read()


@pytest.mark.slow
def test_flow_exported_by_the_command_is_mediasequence_forward_flow(tmp_path,
                                                                    tmp_path_factory):
  source = vt.converted(tmp_path_factory, 'flow')
  # The command line in this process, as the tool's main runs it (tests/entries.py).
  status, summary = entries.call(
      MediaSequenceExport, ['--dataset_dir=%s' % source, '--output_dir=%s' % tmp_path],
      export_media_sequence)
  assert status == 0
  line = summary_line(summary)   # what main prints
  assert line.startswith('exported test ') and 'as MediaSequence' in line
  exported = _read_exported(str(tmp_path), 'test', FLOW)
  reference = vt.read_records(source, 'test', modality='flow')
  assert sorted(exported) == sorted(reference)
  for video_id, (label, _, images, _) in exported.items():
    assert label == reference[video_id][0]
    flow = (images[..., :2] / 255.0 - 0.5) * 2 * 20   # MediaPipe's Kinetics reader
    stored = reference[video_id][1] / 255.0 * 40 - 20   # our u, v: 0..255 spans -20..20
    assert flow.shape == stored.shape
    assert np.abs(flow - stored).max() <= 0.5   # within 3 levels of 40/255 px after JPEG
    assert np.abs(flow - stored).mean() <= 0.1   # under one level on average
    assert images[..., 2].mean() < 1 and images[..., 2].max() <= 6   # B: JPEG error only


def test_old_records_are_sent_to_the_migration_first(tmp_path):
  """The tool's contract, in its own process: status 3 and one `error:` line."""
  vt.write_format1_dataset(str(tmp_path / 'old'))
  result = subprocess.run(
      [sys.executable, '-m', 'datasets.export_media_sequence',
       '--dataset_dir=%s' % (tmp_path / 'old'), '--output_dir=%s' % (tmp_path / 'out')],
      cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT),
      timeout=300)
  assert result.returncode == errors.DATA, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), result.stderr
  assert ('holds records of format 1; export reads format 2; migrate them first with: '
          'python -m datasets.migrate_video_records') in lines[0]


def test_a_damaged_shard_is_one_line_with_its_rebuild_command(tmp_path, tmp_path_factory):
  directory = damaged_data.copy_dataset(vt.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = os.path.join(directory, 'test-00001-of-00002')
  offset, length = damaged_data.record_offsets(shard)[1]
  damaged_data.flip_byte(shard, offset + 12 + length // 2)
  output = tmp_path / 'exported'
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    export_media_sequence(MediaSequenceExport(dataset_dir=directory, output_dir=str(output)))
  assert str(raised.value) == (
      'damaged record shard: %s (corrupted: record 1 at byte %d fails its data CRC); rebuild '
      'it with: python -m datasets.convert_videos --output_dir=%s '
      '--only_shard=test-00001-of-00002' % (shard, offset, directory))
  assert not [name for name in os.listdir(output) if name.startswith('test-00001')]
