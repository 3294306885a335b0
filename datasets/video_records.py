"""The clip record: one video as a `tf.train.SequenceExample`, the layout the field uses.

Context (one value per video; DMVR / MediaSequence names):
    clip/label/index    int64   class index, 0-based
    clip/label/string   bytes   class name
    example/id          bytes   video id (file name without extension), unique per split
    clip/data_path      bytes   the source path relative to the video root
    image/height        int64   frame height after resizing
    image/width         int64   frame width after resizing
    image/channels      int64   3 for rgb, 2 for flow
    image/frame_rate    float   frames per second of the stored frames
    image/format        bytes   b'jpeg'
    clip/modality       bytes   b'rgb' or b'flow'
    clip/num_frames     int64   number of stored frames (length of the feature lists)

Feature lists (one entry per frame, in order):
    rgb:  image/encoded           one RGB JPEG per frame
    flow: flow/u/encoded, flow/v/encoded   one grey JPEG per frame for each flow channel;
          pixel = round((clip(flow, -20, 20) + 20) * 255 / 40), so 0..255 maps to -20..20
          and readers scale to [-1, 1] with pixel / 127.5 - 1.

Readers sample frame indices first and decode only the chosen JPEGs.
"""

from datasets.converted_data import MODALITY_CHANNELS
from datasets.conversion.video_frames import FLOW_BOUND, flow_to_uint8  # pylint: disable=unused-import
from tf_compat import tf

__all__ = ['MODALITIES', 'FLOW_BOUND', 'frame_feature_keys', 'clip_to_sequence_example',
           'parse_clip', 'flow_to_uint8']

MODALITIES = MODALITY_CHANNELS   # modality -> channels


def frame_feature_keys(modality):
  """Feature-list keys holding the per-frame JPEGs, in channel order."""
  if modality == 'rgb':
    return ('image/encoded',)
  if modality == 'flow':
    return ('flow/u/encoded', 'flow/v/encoded')
  raise ValueError('modality=%r is not known; valid: %s' % (modality, ', '.join(MODALITIES)))


def _bytes(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _int64(value):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def _float(value):
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))


def clip_to_sequence_example(frames, *, modality, label, label_string, video_id, data_path,
                             height, width, frame_rate):
  """Builds the record of one video.

  Args:
    frames: rgb: a list of JPEG bytes, one per frame; flow: a list of (u JPEG, v JPEG).
    modality: 'rgb' or 'flow'.
    label, label_string: class index (0-based) and class name.
    video_id, data_path: the video's id and its path relative to the video root.
    height, width: frame size; frame_rate: stored frames per second.

  Returns:
    A `tf.train.SequenceExample`.
  """
  keys = frame_feature_keys(modality)
  if not frames:
    raise ValueError('video %s has no frames' % video_id)
  per_key = [frames] if modality == 'rgb' else [[f[0] for f in frames], [f[1] for f in frames]]
  context = tf.train.Features(feature={
      'clip/label/index': _int64(label),
      'clip/label/string': _bytes([label_string.encode('utf-8')]),
      'example/id': _bytes([video_id.encode('utf-8')]),
      'clip/data_path': _bytes([data_path.encode('utf-8')]),
      'image/height': _int64(height),
      'image/width': _int64(width),
      'image/channels': _int64(MODALITIES[modality]),
      'image/frame_rate': _float(frame_rate),
      'image/format': _bytes([b'jpeg']),
      'clip/modality': _bytes([modality.encode('ascii')]),
      'clip/num_frames': _int64(len(frames)),
  })
  feature_lists = tf.train.FeatureLists(feature_list={
      key: tf.train.FeatureList(feature=[_bytes([jpeg]) for jpeg in jpegs])
      for key, jpegs in zip(keys, per_key)})
  return tf.train.SequenceExample(context=context, feature_lists=feature_lists)


def parse_clip(serialized, modality):
  """Graph ops: parses one serialized record.

  Returns:
    (context dict of scalar tensors, frames): frames is a string tensor [num_frames] of
    JPEGs for rgb, or [num_frames, 2] (u, v) for flow.
  """
  context_spec = {
      'clip/label/index': tf.io.FixedLenFeature([], tf.int64),
      'clip/label/string': tf.io.FixedLenFeature([], tf.string),
      'example/id': tf.io.FixedLenFeature([], tf.string),
      'clip/data_path': tf.io.FixedLenFeature([], tf.string, default_value=''),
      'image/height': tf.io.FixedLenFeature([], tf.int64),
      'image/width': tf.io.FixedLenFeature([], tf.int64),
      'image/frame_rate': tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
      'clip/num_frames': tf.io.FixedLenFeature([], tf.int64),
  }
  keys = frame_feature_keys(modality)
  sequence_spec = {key: tf.io.FixedLenSequenceFeature([], tf.string) for key in keys}
  context, sequences = tf.io.parse_single_sequence_example(
      serialized, context_features=context_spec, sequence_features=sequence_spec)
  if modality == 'rgb':
    return context, sequences[keys[0]]
  return context, tf.stack([sequences[keys[0]], sequences[keys[1]]], axis=1)
