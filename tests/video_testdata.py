"""Small video test data shared by the evaluation, export and predict tests.

Built once per test run (tests/once.py: shared by pytest-xdist's workers), whichever test
asks first:
  * `synthetic_videos()`: make_synthetic_videos, 3 classes x 4 videos of 6-14 frames,
    48x64, UCF101 layout (9 test videos, 3 train).
  * `converted(modality)`: those videos converted by convert_videos as video_folder
    records with short side 32 (frames 32x43), `rgb` or `flow`.
  * `write_format1_dataset(directory)`: a dataset in the older record layout (one record
    per whole video), written by hand with that layout's keys.
  * `random_i3d_checkpoint(...)`: an I3D (depth 0.125) checkpoint of random weights and
    random batch-norm moving statistics (so training-mode batch norm would score
    differently), optionally with moving-average shadows that differ from the weights.
  * `shared_checkpoint(name)`: such checkpoints made once per session: 'rgb_ema' (3
    channels, step 7, with shadows) and 'flow' (2 channels, step 9, seed 1).
  * `shared_export()`: 'rgb_ema' exported once by export_saved_model (2 clips of 8
    frames, crop 32) for the prediction tests: -> (model base dir, its version 1 dir).

And independent references: records decoded with Pillow, frames chosen, cropped and
scaled in NumPy, a network loaded by name from checkpoint values in a graph of its own.
"""

import io
import json
import os

import numpy as np
from PIL import Image

from datasets.conversion.convert_videos import VideoConversion, convert_videos
from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
from nets import nets_factory
from tests.once import made_once
from tf_compat import tf

SHORT_SIDE = 32
CROP = 32
DEPTH = 0.125
NUM_CLASSES = 3
EMA = '/ExponentialMovingAverage'

def synthetic_videos(tmp_path_factory):
  """The make_synthetic_videos summary dict (video_dir, split_dir, videos, ...)."""
  def make(directory):
    return make_synthetic_videos(directory, num_classes=NUM_CLASSES, videos_per_class=4,
                                 min_frames=6, max_frames=14, sizes=((48, 64),), seed=5)

  return made_once(tmp_path_factory, 'synthetic_videos', make)


def converted(tmp_path_factory, modality='rgb'):
  """Directory of the converted video_folder records of the synthetic videos."""
  videos = synthetic_videos(tmp_path_factory)

  def convert(output_dir):
    convert_videos(VideoConversion(
        dataset_name='video_folder', output_dir=output_dir, video_dir=videos['video_dir'],
        splits_dir=videos['split_dir'], modality=modality, short_side=SHORT_SIDE,
        num_processes=2, num_shards=2, progress=False))
    return output_dir

  return made_once(tmp_path_factory, 'converted_' + modality, convert)


def write_checkpoint(prefix, values):
  """Saves exactly `values` (name -> array) as a checkpoint; returns its prefix."""
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  with tf.Graph().as_default():
    variables = {name: tf.Variable(value, name='v%d' % i)
                 for i, (name, value) in enumerate(sorted(values.items()))}
    saver = tf.train.Saver(variables)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return saver.save(sess, prefix, write_meta_graph=False)


def i3d_values(channels, num_classes=NUM_CLASSES, seed=0, frames=8, depth=DEPTH):
  """{variable name: random value} of an I3D, batch-norm statistics included."""
  rng = np.random.RandomState(seed)
  with tf.Graph().as_default():
    network_fn = nets_factory.get_network_fn('i3d', num_classes, is_training=False,
                                             depth_multiplier=depth)
    network_fn(tf.zeros([1, frames, CROP, CROP, channels]))
    values = {}
    for var in tf.global_variables():
      shape = var.shape.as_list()
      name = var.op.name
      if name.endswith('moving_variance'):
        values[name] = rng.uniform(0.5, 2.0, shape)
      elif name.endswith('moving_mean') or name.endswith('beta'):
        values[name] = rng.normal(0.0, 0.3, shape)
      else:
        fan_in = max(1, int(np.prod(shape[:-1])))
        values[name] = rng.normal(0.0, 1.5 / np.sqrt(fan_in), shape)
  return {name: value.astype(np.float32) for name, value in values.items()}


def random_i3d_checkpoint(prefix, channels, global_step=7, seed=0, with_ema=False,
                          num_classes=NUM_CLASSES):
  """-> (checkpoint prefix, raw values, shadow values or None)."""
  values = i3d_values(channels, num_classes, seed)
  stored = dict(values)
  shadows = None
  if with_ema:  # Shadows far enough from the weights to score differently.
    rng = np.random.RandomState(seed + 100)
    shadows = {name: (value * rng.uniform(0.5, 1.5, value.shape)).astype(np.float32)
               for name, value in values.items()}
    stored.update({name + EMA: value for name, value in shadows.items()})
  stored['global_step'] = np.array(global_step, np.int64)
  return write_checkpoint(prefix, stored), values, shadows


_SHARED_CHECKPOINTS = {
    'rgb_ema': dict(channels=3, global_step=7, with_ema=True),
    'flow': dict(channels=2, global_step=9, seed=1),
}


def shared_checkpoint(tmp_path_factory, name):
  """-> (prefix, raw values, shadows or None) of a `_SHARED_CHECKPOINTS` recipe; read-only."""
  recipe = _SHARED_CHECKPOINTS[name]
  def make(directory):
    return random_i3d_checkpoint(
        os.path.join(directory, 'model.ckpt-%d' % recipe['global_step']), **recipe)

  return made_once(tmp_path_factory, 'checkpoint_' + name, make)


EXPORT_SAMPLING = dict(depth_multiplier=DEPTH, eval_image_size=CROP, eval_clips=2,
                       clip_frames=8)


def shared_export(tmp_path_factory):
  """-> (model_dir, version_dir): shared_checkpoint 'rgb_ema' exported with
  EXPORT_SAMPLING into model_dir, made once per test run; read-only (a test that changes
  it copies it first)."""
  from serving.export_model import ExportConfig, export_saved_model  # pylint: disable=import-outside-toplevel
  prefix = shared_checkpoint(tmp_path_factory, 'rgb_ema')[0]
  dataset_dir = converted(tmp_path_factory, 'rgb')

  def make(directory):
    model_dir = os.path.join(directory, 'model')
    version_dir = export_saved_model(ExportConfig(
        checkpoint_path=prefix, model_name='i3d', dataset_dir=dataset_dir,
        export_dir=model_dir, **EXPORT_SAMPLING)).version_dir
    return model_dir, version_dir

  return made_once(tmp_path_factory, 'export_rgb_ema', make)


# ----------------------------------------------------------------------------- references


def whole_videos(dataset_dir, split):
  """{video id: tf.train.SequenceExample of the whole video}, put together from the chunk
  records of every `<split>-?????-of-?????` shard: the first chunk's context, and each
  feature list concatenated in `chunk/first_frame` order (checked to tile the video)."""
  chunks = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(dataset_dir, '%s-?????-of-?????' % split))):
    for serialized in tf.io.tf_record_iterator(path):
      example = tf.train.SequenceExample.FromString(serialized)
      video_id = example.context.feature['example/id'].bytes_list.value[0].decode()
      chunks.setdefault(video_id, []).append(example)
  videos = {}
  for video_id, parts in chunks.items():
    parts.sort(key=lambda e: e.context.feature['chunk/first_frame'].int64_list.value[0])
    whole = tf.train.SequenceExample()
    whole.context.CopyFrom(parts[0].context)
    for part in parts:
      first = part.context.feature['chunk/first_frame'].int64_list.value[0]
      for key, frames in part.feature_lists.feature_list.items():
        assert len(whole.feature_lists.feature_list[key].feature) == first, video_id
        whole.feature_lists.feature_list[key].feature.extend(frames.feature)
    num_frames = whole.context.feature['clip/num_frames'].int64_list.value[0]
    assert all(len(f.feature) == num_frames
               for f in whole.feature_lists.feature_list.values()), video_id
    videos[video_id] = whole
  return videos


def read_records(dataset_dir, split='test', modality='rgb'):
  """{video id: (label, frames uint8 [T, H, W, C])} decoded with Pillow."""
  videos = {}
  keys = ['image/encoded'] if modality == 'rgb' else ['flow/u/encoded', 'flow/v/encoded']
  for video_id, example in whole_videos(dataset_dir, split).items():
    label = example.context.feature['clip/label/index'].int64_list.value[0]
    lists = example.feature_lists.feature_list
    channels = [[_pil(f.bytes_list.value[0]) for f in lists[key].feature] for key in keys]
    if modality == 'rgb':
      frames = np.stack(channels[0])
    else:
      frames = np.stack([np.stack(c) for c in channels], axis=-1)
    videos[video_id] = (label, frames)
  return videos


def _pil(encoded):
  with Image.open(io.BytesIO(encoded)) as image:
    return np.asarray(image)


def centre_crop(frames, size=CROP):
  """uint8 [T, H, W, C] with H, W >= size -> [T, size, size, C]."""
  height, width = frames.shape[1:3]
  top, left = (height - size) // 2, (width - size) // 2
  return frames[:, top:top + size, left:left + size]


def reference_clips(frames, eval_frames=None, eval_clips=None, clip_frames=8, size=CROP):
  """float32 [K, T, size, size, C] in [-1, 1]: the evaluation sampling, in NumPy."""
  count = len(frames)
  if eval_frames:
    starts, length = [0], eval_frames
  else:
    span = max(count - clip_frames, 0)
    starts = [k * span // max(eval_clips - 1, 1) for k in range(eval_clips)]
    length = clip_frames
  clips = [centre_crop(frames[[(s + t) % count for t in range(length)]], size)
           for s in starts]
  return np.stack(clips).astype(np.float32) / 127.5 - 1.0


def reference_logits(values, clips, num_classes=NUM_CLASSES, depth=DEPTH):
  """I3D logits of clips float32 [n, T, H, W, C] with variables loaded from `values`."""
  with tf.Graph().as_default():
    inputs = tf.placeholder(tf.float32, [None] + list(clips.shape[1:]))
    network_fn = nets_factory.get_network_fn('i3d', num_classes, is_training=False,
                                             depth_multiplier=depth)
    logits, _ = network_fn(inputs)
    with tf.Session() as sess:
      # Every variable's initializer run once, fed its value (one run, not a var.load per
      # variable: each run of another fetch is a new graph for grappler to rewrite).
      variables = tf.global_variables()
      sess.run([var.initializer for var in variables],
               {var.initial_value: values[var.op.name] for var in variables})
      return sess.run(logits, {inputs: clips})


# ------------------------------------------------- format 1 (one record per whole video)

# split -> shards -> [(video id, label, number of frames)]
FORMAT1_SHARDS = {'train': [[('a', 0, 9), ('b', 1, 1)], [('c', 1, 17)]],
                  'test': [[('d', 0, 4), ('e', 1, 12)]]}
FORMAT1_CLASSES = ['left', 'right']


def _noise_jpeg(seed):
  """A 16x20 frame of noise as a JPEG."""
  pixels = np.random.RandomState(seed).randint(0, 256, (16, 20, 3)).astype(np.uint8)
  buffer = io.BytesIO()
  Image.fromarray(pixels).save(buffer, format='JPEG', quality=80)
  return buffer.getvalue()


def _format1_frames(video_id, count, modality):
  """rgb: JPEGs; flow: (u, v) byte strings (never decoded by the tests that use them)."""
  base = 1000 * ord(video_id)
  if modality == 'rgb':
    return [_noise_jpeg(base + i) for i in range(count)]
  return [(_noise_jpeg(base + i)[:300], _noise_jpeg(base + 500 + i)[:200])
          for i in range(count)]


def format1_record(video_id, label, frames, modality):
  """A format-1 record: the whole video in one SequenceExample."""
  example = tf.train.SequenceExample()
  context = example.context.feature
  context['clip/label/index'].int64_list.value.append(label)
  context['clip/label/string'].bytes_list.value.append(FORMAT1_CLASSES[label].encode())
  context['example/id'].bytes_list.value.append(video_id.encode())
  context['clip/data_path'].bytes_list.value.append(
      ('%s/%s.avi' % (FORMAT1_CLASSES[label], video_id)).encode())
  for key, value in (('image/height', 16), ('image/width', 20), ('clip/num_frames',
                                                                   len(frames)),
                     ('image/channels', 3 if modality == 'rgb' else 2)):
    context[key].int64_list.value.append(value)
  context['image/frame_rate'].float_list.value.append(25.0)
  context['image/format'].bytes_list.value.append(b'jpeg')
  context['clip/modality'].bytes_list.value.append(modality.encode())
  keys = ['image/encoded'] if modality == 'rgb' else ['flow/u/encoded', 'flow/v/encoded']
  for k, key in enumerate(keys):
    for frame in frames:
      jpeg = frame if modality == 'rgb' else frame[k]
      example.feature_lists.feature_list[key].feature.add().bytes_list.value.append(jpeg)
  return example.SerializeToString()


def write_format1_dataset(directory, modality='rgb'):
  """A converted video_folder dataset as the converter wrote it before format 2 (no
  "format_version"); -> {video id: frames as written}."""
  os.makedirs(directory)
  frames = {}
  for split, shards in FORMAT1_SHARDS.items():
    for index, videos in enumerate(shards):
      path = os.path.join(directory, '%s-%05d-of-%05d' % (split, index, len(shards)))
      with tf.io.TFRecordWriter(path) as writer:
        for video_id, label, count in videos:
          frames[video_id] = _format1_frames(video_id, count, modality)
          writer.write(format1_record(video_id, label, frames[video_id], modality))
  sizes = {split: sum(len(s) for s in shards) for split, shards in FORMAT1_SHARDS.items()}
  with open(os.path.join(directory, 'dataset_info.json'), 'w') as handle:
    json.dump({'dataset_name': 'video_folder', 'num_classes': 2,
               'num_channels': 3 if modality == 'rgb' else 2, 'splits': sizes,
               'modality': modality}, handle)
  with open(os.path.join(directory, 'labels.txt'), 'w') as handle:
    handle.write('0:left\n1:right\n')
  with open(os.path.join(directory, 'manifest.json'), 'w') as handle:
    handle.write('{"videos": {"train": 3, "test": 2}}\n')
  return frames
