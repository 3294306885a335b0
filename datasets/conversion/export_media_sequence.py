"""Converted video records -> whole-video records in the field's layout: the work of
`python -m datasets.export_media_sequence`.

Each video becomes one `tf.train.SequenceExample` with MediaPipe MediaSequence's keys (which
DMVR's readers and TF Model Garden's video input take too), in shards named as the source's
(`<split>-0000i-of-000NN`, one per source shard, same videos in the same order), plus
`labels.txt`:

Context:
    example/id, clip/media_id   bytes        the video id
    clip/data_path              bytes        the source path relative to the video root
    clip/label/index            int64 [1]    class index, 0-based
    clip/label/string           bytes [1]    class name (MediaSequence)
    clip/label/text             bytes [1]    class name (DMVR's key for it)
    clip/start/timestamp, clip/end/timestamp  int64  0 and the video's duration, in
                                             microseconds (when the frame rate is known)
    <P>image/format b'JPEG', <P>image/channels 3, <P>image/height, <P>image/width,
    <P>image/frame_rate
Feature lists, one entry per frame:
    <P>image/encoded    the frame's JPEG
    <P>image/timestamp  int64 microseconds, frame / frame_rate (when the rate is known)
where <P> is '' for rgb and 'FORWARD_FLOW/' for flow.

rgb frames are the stored JPEG bytes, unchanged. Flow is stored here as two grey JPEGs
per frame; MediaSequence (MediaPipe's FlowToImageCalculator) stores one 3-channel image,
R = horizontal flow u, G = vertical flow v, B = 0, each quantised from [-20, 20] to 0..255,
the quantisation of our u and v. So each flow frame is re-encoded: u and v decoded, put in
R and G, encoded as JPEG at `flow_jpeg_quality` without chroma subsampling (MediaPipe's
graph encodes at quality 100). Readers recover flow as (pixel / 255 - 0.5) * 2 * 20.
"""

import dataclasses
import io
import os
from typing import Optional

import numpy as np
from PIL import Image

from core.errors import DataError, require
from core.params import param
from datasets.conversion import shard_writer, video_shards
from datasets.formats import converted_data, damaged_shards, video_records
from datasets.formats.shards import find_shards
from tf_compat import tf

__all__ = ['MediaSequenceExport', 'export_media_sequence', 'summary_line']

FLOW_PREFIX = 'FORWARD_FLOW/'   # MediaSequence's prefix of forward optical flow images


@dataclasses.dataclass(frozen=True)
class MediaSequenceExport:
  """One export; each field is also a flag of `python -m datasets.export_media_sequence`."""
  # Data.
  dataset_dir: Optional[str] = param(None, 'Converted video records (format 2; only read).')
  output_dir: Optional[str] = param(None, 'Directory for the MediaSequence shards and '
                                    'labels.txt.')
  # Flow.
  flow_jpeg_quality: int = param(100, 'JPEG quality of the re-encoded flow images '
                                 '(R = u, G = v, B = 0).')


def _feature(values, kind):
  if kind == 'bytes':
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))
  if kind == 'int64':
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def _flow_image(u_jpeg, v_jpeg, quality):
  """Two grey JPEGs -> one RGB JPEG with R = u, G = v, B = 0."""
  planes = []
  for jpeg in (u_jpeg, v_jpeg):
    with Image.open(io.BytesIO(jpeg)) as image:
      planes.append(np.asarray(image.convert('L')))
  rgb = np.stack(planes + [np.zeros_like(planes[0])], axis=-1)
  buffer = io.BytesIO()
  Image.fromarray(rgb).save(buffer, format='JPEG', quality=quality, subsampling=0)
  return buffer.getvalue()


def _video_frames(chunks, modality):
  """(first chunk's context feature map, frames) of one video's chunk records; frames are
  JPEG bytes (rgb) or (u, v) pairs (flow)."""
  keys = video_records.frame_feature_keys(modality)
  columns = [[] for _ in keys]
  context = None
  for serialized in chunks:
    example = tf.train.SequenceExample.FromString(serialized)
    context = context or example.context.feature
    for column, key in zip(columns, keys):
      column.extend(f.bytes_list.value[0]
                    for f in example.feature_lists.feature_list[key].feature)
  return context, (columns[0] if modality == 'rgb' else list(zip(*columns)))


def media_sequence_example(chunks, modality, flow_jpeg_quality):
  """The serialized whole-video MediaSequence record of one video's chunk records."""
  context, frames = _video_frames(chunks, modality)
  prefix = '' if modality == 'rgb' else FLOW_PREFIX
  encoded = (frames if modality == 'rgb' else
             [_flow_image(u, v, flow_jpeg_quality) for u, v in frames])
  rate = context['image/frame_rate'].float_list.value[0]
  name = context['clip/label/string'].bytes_list.value[0]
  video_id = context['example/id'].bytes_list.value[0]
  features = {
      'example/id': _feature([video_id], 'bytes'),
      'clip/media_id': _feature([video_id], 'bytes'),
      'clip/data_path': context['clip/data_path'],
      'clip/label/index': context['clip/label/index'],
      'clip/label/string': _feature([name], 'bytes'),
      'clip/label/text': _feature([name], 'bytes'),
      prefix + 'image/format': _feature([b'JPEG'], 'bytes'),
      prefix + 'image/channels': _feature([3], 'int64'),
      prefix + 'image/height': context['image/height'],
      prefix + 'image/width': context['image/width'],
      prefix + 'image/frame_rate': _feature([rate], 'float'),
  }
  lists = {prefix + 'image/encoded': tf.train.FeatureList(
      feature=[_feature([jpeg], 'bytes') for jpeg in encoded])}
  if rate > 0:
    features['clip/start/timestamp'] = _feature([0], 'int64')
    features['clip/end/timestamp'] = _feature([round(len(frames) * 1e6 / rate)], 'int64')
    lists[prefix + 'image/timestamp'] = tf.train.FeatureList(
        feature=[_feature([round(i * 1e6 / rate)], 'int64') for i in range(len(frames))])
  return tf.train.SequenceExample(
      context=tf.train.Features(feature=features),
      feature_lists=tf.train.FeatureLists(feature_list=lists)).SerializeToString(
          deterministic=True)


def _check(export):
  """-> dataset_info.json of a format-2 video dataset; ConfigError or DataError otherwise."""
  require(export.dataset_dir, '--dataset_dir is required: converted video records')
  require(export.output_dir, '--output_dir is required')
  require(1 <= export.flow_jpeg_quality <= 100, '--flow_jpeg_quality=%d must be in 1..100'
          % export.flow_jpeg_quality)
  require(os.path.realpath(export.output_dir) != os.path.realpath(export.dataset_dir),
          '--output_dir must differ from --dataset_dir')
  info = converted_data.read_dataset_info(export.dataset_dir)
  require(info is not None and info.get('modality') in video_records.MODALITIES,
          '--dataset_dir=%s holds no converted video records (no dataset_info.json with a '
          'modality)' % export.dataset_dir)
  version = info.get('format_version', 1)
  if version != video_records.FORMAT_VERSION:
    raise DataError('--dataset_dir=%s holds records of format %s; export reads format %d; '
                    'migrate them first with: %s' % (
                        export.dataset_dir, version, video_records.FORMAT_VERSION,
                        converted_data.migrate_command(export.dataset_dir)))
  return info


def _export_shard(export, modality, shard, split_name, index, num_shards):
  """Writes the MediaSequence shard of one source shard, a video at a time; -> videos."""
  count = [0]

  def records():
    for _, chunks in video_shards.read_video_shard(shard):
      count[0] += 1
      yield media_sequence_example(chunks, modality, export.flow_jpeg_quality)

  try:
    shard_writer.write_shard(records(), export.output_dir, split_name, index, num_shards,
                             num_records=None)
  except (ValueError, tf.errors.OpError) as error:
    raise _damaged(shard, error) from None
  return count[0]


def _damaged(shard, error):
  """DamagedShards for a source shard that could not be read: what is wrong with the shard
  or its index, with the command that rebuilds it (one line)."""
  damaged = [(path, problem) for path in (shard, video_records.index_path(shard))
             for problem in [damaged_shards.file_problem(path)] if problem]
  return damaged_shards.DamagedShards(damaged or [(shard, str(error).split('\n')[0])])


def export_media_sequence(export):
  """Writes every split's shards in the MediaSequence layout (module docstring).

  Returns:
    {'splits': {split: videos written}, 'output_dir': path}.

  Raises:
    ConfigError: a bad flag. DataError: records that are not format 2, or a shard that
      cannot be read (DamagedShards: named, with the command that rebuilds it). OSError:
      the output could not be written.
  """
  info = _check(export)
  modality = info['modality']
  written = {}
  for split_name in sorted(info['splits']):
    try:
      shards = find_shards(export.dataset_dir, split_name)
    except ValueError as error:
      raise DataError('--dataset_dir=%s: %s' % (export.dataset_dir, error)) from None
    written[split_name] = 0
    for index, shard in enumerate(shards):
      written[split_name] += _export_shard(export, modality, shard, split_name, index,
                                           len(shards))
  converted_data.write_labels_file(converted_data.read_labels_file(export.dataset_dir),
                                   export.output_dir)
  return {'splits': written, 'output_dir': export.output_dir}


def summary_line(summary):
  videos = ', '.join('%s %d' % item for item in sorted(summary['splits'].items()))
  return 'exported %s videos as MediaSequence records into %s' % (videos,
                                                                  summary['output_dir'])
