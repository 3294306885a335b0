"""The clip records of a video dataset (format 2): chunked SequenceExamples and an index.

A clip read costs the bytes of the frames it uses (within the frames of one chunk at each
end), whatever the video's length: the reader looks a sampled clip's frames up in the
index and reads only the byte ranges of the chunks that hold them.

Per split, shard files `<split>-0000i-of-000NN` (TFRecord), each with its index beside it,
`<split>-0000i-of-000NN.index` (TFRecord too). `dataset_info.json` records
`"format_version": 2` and `"chunk_frames"`; format 1 (before the key existed) held one
record per whole video and is migrated by `python -m datasets.migrate_video_records`.

The shard: each video as consecutive records, one per chunk of `chunk_frames`
consecutive frames (the last chunk may be shorter), in frame order. A chunk record is a
`tf.train.SequenceExample` in the MediaSequence / DMVR layout, so the field's tools read
each chunk as a clip of its video:

Context (the video's, repeated in each of its chunks; DMVR / MediaSequence names):
    clip/label/index    int64   class index, 0-based
    clip/label/string   bytes   class name
    example/id          bytes   video id (file name without extension), unique per split
    clip/media_id       bytes   the same video id (MediaSequence's name for it)
    clip/data_path      bytes   the source path relative to the video root
    image/height        int64   frame height after resizing
    image/width         int64   frame width after resizing
    image/channels      int64   3 for rgb, 2 for flow
    image/frame_rate    float   frames per second of the stored frames
    image/format        bytes   b'jpeg'
    clip/modality       bytes   b'rgb' or b'flow'
    clip/num_frames     int64   frames of the whole video
    chunk/first_frame   int64   index in the video of this chunk's first frame

Feature lists (one entry per frame of the chunk, in order):
    rgb:  image/encoded           one RGB JPEG per frame
    flow: flow/u/encoded, flow/v/encoded   one grey JPEG per frame for each flow channel;
          pixel = round((clip(flow, -20, 20) + 20) * 255 / 40), so 0..255 maps to -20..20
          and readers scale to [-1, 1] with pixel / 127.5 - 1 (`flow_encoding`).
`python -m datasets.export_media_sequence` writes whole-video records with the field's
keys, flow as MediaSequence's `FORWARD_FLOW/image/encoded` (R = u, G = v, B = 0).

The index: one `tf.train.Example` per video, in shard order:
    example/id          bytes   video id
    clip/label/index    int64   class index
    chunk/frame_bounds  int64 [n + 1]  chunk k holds frames [b[k], b[k + 1]); b[n] is
                                       the video's frame count
    chunk/byte_bounds   int64 [n + 1]  chunk k's record starts at byte b[k] of the shard
                                       (its TFRecord length field) and ends at b[k + 1]
A TFRecord record of L bytes occupies L + 16 bytes (8 length, 4 length CRC, data, 4 data
CRC), so the bounds follow from the record sizes and are checked against the file.

Readers sample frame indices first, read the chunks that hold them and decode only the
chosen JPEGs (`datasets/inputs/clip_reader.py`). Records and index entries are serialized
deterministically, so `python -m datasets.convert_videos --only_shard` rebuilds a shard
and its index byte for byte; `python -m datasets.verify_records` checks that each index
lists exactly the chunks its shard holds (`datasets/checks/index_check.py`).
"""

import dataclasses

from datasets.formats.converted_data import MODALITY_CHANNELS, VIDEO_FORMAT_VERSION
from datasets.formats.shards import INDEX_SUFFIX
from tf_compat import tf

__all__ = ['MODALITIES', 'FORMAT_VERSION', 'DEFAULT_CHUNK_FRAMES', 'RECORD_OVERHEAD',
           'VideoHeader', 'frame_feature_keys', 'chunk_bounds', 'video_chunks', 'index_entry',
           'index_path', 'parse_index_entry', 'parse_chunks']

MODALITIES = MODALITY_CHANNELS   # modality -> channels
FORMAT_VERSION = VIDEO_FORMAT_VERSION
DEFAULT_CHUNK_FRAMES = 8   # a 64-frame clip at a random start reads 71 frames on average
RECORD_OVERHEAD = 16       # bytes a TFRecord adds to each record


def frame_feature_keys(modality):
  """Feature-list keys holding the per-frame JPEGs, in channel order."""
  if modality == 'rgb':
    return ('image/encoded',)
  if modality == 'flow':
    return ('flow/u/encoded', 'flow/v/encoded')
  raise ValueError('modality=%r is not known; valid: %s' % (modality, ', '.join(MODALITIES)))


def index_path(shard_path):
  """The index file of a shard: `<shard>.index`."""
  return shard_path + INDEX_SUFFIX


def _bytes(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _int64(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _float(value):
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))


def chunk_bounds(num_frames, chunk_frames):
  """[0, C, 2C, ..., num_frames]: the frame bounds of a video's chunks."""
  if not isinstance(chunk_frames, int) or chunk_frames < 1:
    raise ValueError('chunk_frames=%r is not accepted: use a positive integer'
                     % (chunk_frames,))
  return list(range(0, num_frames, chunk_frames)) + [num_frames]


@dataclasses.dataclass(frozen=True)
class VideoHeader:
  """What each chunk record of one video repeats in its context (the module docstring's
  keys in brackets)."""
  modality: str        # 'rgb' or 'flow' [clip/modality, image/channels]
  label: int           # class index, 0-based [clip/label/index]
  label_string: str    # class name [clip/label/string]
  video_id: str        # unique per split [example/id, clip/media_id]
  data_path: str       # the source path relative to the video root [clip/data_path]
  height: int          # frame size after resizing [image/height, image/width]
  width: int
  frame_rate: float    # stored frames per second [image/frame_rate]


def video_chunks(frames, header, chunk_frames=DEFAULT_CHUNK_FRAMES):
  """The chunk records of one video.

  Args:
    frames: rgb: a list of JPEG bytes, one per frame; flow: a list of (u JPEG, v JPEG).
    header: the video's VideoHeader.
    chunk_frames: frames per chunk (the last chunk may hold fewer).

  Returns:
    (serialized chunk records in frame order, frame bounds [n + 1]). Serialized
    deterministically (maps in key order): the same video gives the same bytes in any
    process, so a rebuilt shard is byte-identical to the original.
  """
  keys = frame_feature_keys(header.modality)
  if not frames:
    raise ValueError('video %s has no frames' % header.video_id)
  bounds = chunk_bounds(len(frames), chunk_frames)
  context = _video_context(header, len(frames))
  records = [_chunk_record(context, keys, first, frames[first:end])
             for first, end in zip(bounds[:-1], bounds[1:])]
  return records, bounds


def _video_context(header, num_frames):
  """The context features every chunk of the video repeats."""
  return {
      'clip/label/index': _int64([header.label]),
      'clip/label/string': _bytes([header.label_string.encode('utf-8')]),
      'example/id': _bytes([header.video_id.encode('utf-8')]),
      'clip/media_id': _bytes([header.video_id.encode('utf-8')]),
      'clip/data_path': _bytes([header.data_path.encode('utf-8')]),
      'image/height': _int64([header.height]),
      'image/width': _int64([header.width]),
      'image/channels': _int64([MODALITIES[header.modality]]),
      'image/frame_rate': _float(header.frame_rate),
      'image/format': _bytes([b'jpeg']),
      'clip/modality': _bytes([header.modality.encode('ascii')]),
      'clip/num_frames': _int64([num_frames]),
  }


def _chunk_record(context, keys, first, part):
  """One chunk's serialized SequenceExample: `part`, the frames from frame `first` on,
  one feature list per key of `keys` (rgb: the JPEGs; flow: u and v of each pair)."""
  per_key = [part] if len(keys) == 1 else [[f[0] for f in part], [f[1] for f in part]]
  features = dict(context, **{'chunk/first_frame': _int64([first])})
  return tf.train.SequenceExample(
      context=tf.train.Features(feature=features),
      feature_lists=tf.train.FeatureLists(feature_list={
          key: tf.train.FeatureList(feature=[_bytes([jpeg]) for jpeg in jpegs])
          for key, jpegs in zip(keys, per_key)})).SerializeToString(deterministic=True)


def index_entry(video_id, label, frame_bounds, byte_bounds):
  """The serialized index Example of one video (layout in the module docstring)."""
  return tf.train.Example(features=tf.train.Features(feature={
      'example/id': _bytes([video_id.encode('utf-8') if isinstance(video_id, str)
                            else video_id]),
      'clip/label/index': _int64([label]),
      'chunk/frame_bounds': _int64(frame_bounds),
      'chunk/byte_bounds': _int64(byte_bounds),
  })).SerializeToString(deterministic=True)


def parse_index_entry(serialized):
  """Graph ops: one serialized index Example -> dict of 'video_id' string [], 'label'
  int64 [], 'frame_bounds' and 'byte_bounds' int64 [n + 1]."""
  parsed = tf.io.parse_single_example(serialized, {
      'example/id': tf.io.FixedLenFeature([], tf.string),
      'clip/label/index': tf.io.FixedLenFeature([], tf.int64),
      'chunk/frame_bounds': tf.io.VarLenFeature(tf.int64),
      'chunk/byte_bounds': tf.io.VarLenFeature(tf.int64),
  })
  return {'video_id': parsed['example/id'], 'label': parsed['clip/label/index'],
          'frame_bounds': tf.sparse.to_dense(parsed['chunk/frame_bounds']),
          'byte_bounds': tf.sparse.to_dense(parsed['chunk/byte_bounds'])}


def parse_chunks(serialized, modality):
  """Graph ops: serialized chunk records string [n] of one video, in frame order.

  Returns:
    (context dict: 'example/id' string [n], 'chunk/first_frame' int64 [n];
     frames: the chunks' JPEGs concatenated, string [F] for rgb or [F, 2] (u, v) for flow;
     lengths: int64 [n], frames per chunk).
  """
  keys = frame_feature_keys(modality)
  context, sequences, lengths = tf.io.parse_sequence_example(
      serialized,
      context_features={'example/id': tf.io.FixedLenFeature([], tf.string),
                        'chunk/first_frame': tf.io.FixedLenFeature([], tf.int64)},
      sequence_features={key: tf.io.FixedLenSequenceFeature([], tf.string) for key in keys})
  # Each chunk's frames, padded to the longest chunk, then the padding dropped.
  columns = [tf.boolean_mask(sequences[key], tf.sequence_mask(lengths[key],
                                                             tf.shape(sequences[key])[1]))
             for key in keys]
  frames = columns[0] if modality == 'rgb' else tf.stack(columns, axis=1)
  return context, frames, lengths[keys[0]]
