"""Tiny clip records for the clip pipeline's tests, and the readers that check what comes out.

Every frame encodes what it is and where it was cut from. rgb frame i: red = 6 * i
everywhere, green = 4 * column, blue = 4 * row. flow frame i: u = 100 + 3 * i everywhere,
v = 4 * column. Output clips are read back to (frame index, crop offset, flip) from those
values and then compared pixel by pixel with Pillow's decode of the stored JPEG, cropped and
flipped in NumPy.
"""

import dataclasses
import io

import numpy as np
from PIL import Image

from datasets.conversion import video_shards
from datasets.formats import dataset_split, shards, video_records
from datasets.inputs import clip_input
from datasets.inputs.input_settings import InputSettings, Sampling
from tf_compat import tf

CROP = 32


TOLERANCE = 0.01  # pixel levels: both decoders use libjpeg's accurate integer DCT


RESIZE_TOLERANCE = 3.0  # a resized JPEG gradient against the exact gradient


# video id -> (label, frames, height, width); one label per video identifies it in training.
RGB_VIDEOS = {'v0': (0, 1, 40, 60), 'v1': (1, 5, 64, 48), 'v2': (2, 16, 40, 60),
              'v3': (3, 40, 64, 48), 'v4': (4, 7, 24, 30)}  # v4 is below CROP: resized


RESIZED = 'v4'


FLOW_VIDEOS = {'f0': (0, 3, 40, 60), 'f1': (1, 12, 48, 40)}


def jpeg(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='JPEG', quality=95, subsampling=0)
  return buffer.getvalue()


def pil(encoded):
  with Image.open(io.BytesIO(encoded)) as image:
    return np.asarray(image).astype(np.float32)


def rgb_frame(index, height, width):
  rows, cols = np.mgrid[:height, :width]
  return np.stack([np.full_like(rows, 6 * index), 4 * cols, 4 * rows], -1).astype(np.uint8)


def flow_frame(index, height, width):
  u = np.full((height, width), 100 + 3 * index, np.uint8)
  v = np.tile((4 * np.arange(width)).astype(np.uint8), (height, 1))
  return jpeg(u), jpeg(v)


def make_split(directory, name, num_videos, num_classes, modality, num_shards):
  fields = dict(name=name, split_name='train', dataset_dir=directory,
                file_pattern=shards.shard_file_pattern(directory, 'train', num_shards),
                num_samples=num_videos, num_classes=num_classes,
                labels_to_names={i: 'class%d' % i for i in range(num_classes)},
                num_channels=video_records.MODALITIES[modality])
  if 'modality' in {field.name for field in dataclasses.fields(dataset_split.DatasetSplit)}:
    fields['modality'] = modality
  return dataset_split.DatasetSplit(**fields)


def write_split(tmp_path_factory, name, videos, modality, num_shards, chunk_frames):
  """-> (DatasetSplit, {video id: (label, [stored frames], height, width)}); small chunks,
  so that clips cross chunk bounds and the last chunk of a video is short."""
  directory = str(tmp_path_factory.mktemp(name))
  stored, records = {}, []
  for video_id, (label, length, height, width) in sorted(videos.items()):
    if modality == 'rgb':
      frames = [jpeg(rgb_frame(i, height, width)) for i in range(length)]
    else:
      frames = [flow_frame(i, height, width) for i in range(length)]
    stored[video_id] = (label, frames, height, width)
    header = video_records.VideoHeader(
        modality=modality, label=label, label_string='class%d' % label, video_id=video_id,
        data_path='%s.avi' % video_id, height=height, width=width, frame_rate=25.0)
    records.append(video_shards.chunk_video(frames, header, chunk_frames))
  for index in range(num_shards):  # contiguous runs of videos, as the converter cuts them
    part = records[index * len(records) // num_shards:(index + 1) * len(records) // num_shards]
    video_shards.write_video_shard(part, directory, 'train', index, num_shards)
  return make_split(directory, name, len(videos), len(videos), modality, num_shards), stored


def batches_of(make_dataset, limit=None):
  """Runs make_dataset() in a new graph -> list of batches (tuples of numpy arrays)."""
  batches = []
  with tf.Graph().as_default() as graph, tf.Session(graph=graph) as sess:
    next_batch = tf.data.make_one_shot_iterator(make_dataset()).get_next()
    while limit is None or len(batches) < limit:
      try:
        batches.append(sess.run(next_batch))
      except tf.errors.OutOfRangeError:
        break
  return batches


def training(split, **overrides):
  fields = dict(batch_size=4, clip_frames=8, image_size=CROP, num_readers=2,
                num_parallel_calls=2, shuffle_buffer_size=8, seed=1)
  fields.update(overrides)
  return lambda: clip_input.build_clip_dataset(split, InputSettings(**fields),
                                               is_training=True)


def evaluation(split, eval_frames=None, eval_clips=None, **overrides):
  """Evaluation's pipeline: the first `eval_frames` frames or `eval_clips` clips of
  clip_frames per video (neither: the builder's 1 clip)."""
  fields = dict(batch_size=2, clip_frames=8, image_size=CROP, num_readers=2,
                num_parallel_calls=2, drop_remainder=False)
  fields.update(overrides)
  if eval_frames is not None or eval_clips is not None:
    sampling = Sampling(eval_frames, eval_clips, eval_frames or fields['clip_frames'],
                        fields['image_size'])
    fields.update(clip_frames=sampling.clip_frames, sampling=sampling)
  return lambda: clip_input.build_clip_dataset(split, InputSettings(**fields),
                                               is_training=False)


def pixel_values(clip):
  return (clip + 1.0) * 127.5


def flipped_frame(frame):
  """A frame's flip flag from the sign of its horizontal gradient (green, or flow v)."""
  return frame[:, -1, -1].mean() < frame[:, 0, -1].mean()


def resized_gradients(x):
  """Green and blue [CROP, CROP] of v4 (24x30 resized to 32x40) cropped at (0, x).

  Bilinear resizing with half-pixel centres samples the source at (i + 0.5) * 24 / 32 - 0.5,
  clamped to the image; the source gradients are 4 * column and 4 * row.
  """
  rows = np.clip((np.arange(CROP) + 0.5) * 0.75 - 0.5, 0, 23)
  cols = np.clip((np.arange(CROP) + x + 0.5) * 0.75 - 0.5, 0, 29)
  return (np.broadcast_to(4 * cols[None, :], (CROP, CROP)),
          np.broadcast_to(4 * rows[:, None], (CROP, CROP)))


def read_rgb_frame(frame, video_id):
  """rgb output frame [CROP, CROP, 3] in [-1, 1] -> (index, y, x, flipped)."""
  pixels = pixel_values(frame)
  flipped = flipped_frame(pixels[..., :2])
  if flipped:
    pixels = pixels[:, ::-1]
  index = int(round(pixels[..., 0].mean() / 6.0))
  if video_id == RESIZED:
    errors = [np.abs(pixels[..., 1] - resized_gradients(x)[0]).max() for x in range(9)]
    return index, 0, int(np.argmin(errors)), flipped
  steps = 4.0 * np.arange(CROP)
  x = np.mean(pixels[..., 1] - steps[None, :]) / 4.0
  y = np.mean(pixels[..., 2] - steps[:, None]) / 4.0
  return index, int(round(y)), int(round(x)), flipped


def expected_rgb(stored, video_id, index, y, x, flipped):
  """The output frame's pixels from Pillow's decode (or the exact gradients if resized)."""
  if video_id == RESIZED:
    green, blue = resized_gradients(x)
    crop = np.stack([np.full((CROP, CROP), 6.0 * index), green, blue], -1)
  else:
    crop = pil(stored[1][index])[y:y + CROP, x:x + CROP]
  return crop[:, ::-1] if flipped else crop


def check_rgb_clip(clip, stored, video_id):
  """Checks one clip [T, CROP, CROP, 3] -> (frame indices, (y, x), flipped)."""
  read = [read_rgb_frame(frame, video_id) for frame in clip]
  indices = [index for index, _, _, _ in read]
  assert len({(y, x, flipped) for _, y, x, flipped in read}) == 1, read  # one crop and flip
  _, y, x, flipped = read[0]
  height, width = stored_size(video_id, stored)
  assert 0 <= y <= height - CROP and 0 <= x <= width - CROP
  tolerance = RESIZE_TOLERANCE if video_id == RESIZED else TOLERANCE
  for frame, index in zip(clip, indices):
    np.testing.assert_allclose(pixel_values(frame),
                               expected_rgb(stored, video_id, index, y, x, flipped),
                               atol=tolerance)
  return indices, (y, x), flipped


def stored_size(video_id, stored):
  """(height, width) after the pipeline's resizing: v4's 24x30 becomes 32x40."""
  return (CROP, 40) if video_id == RESIZED else (stored[2], stored[3])


def assert_loops(indices, start, length):
  np.testing.assert_array_equal(indices, (start + np.arange(len(indices))) % length)


def eval_results(split, **overrides):
  """-> {video id: (label, clips)} from one evaluation pass, checking each id appears once."""
  results = {}
  for clips, labels, video_ids in batches_of(evaluation(split, **overrides)):
    for clip, label, video_id in zip(clips, labels, video_ids):
      video_id = video_id.decode()
      assert video_id not in results
      results[video_id] = (label, clip)
  return results


def check_centre_rgb_clip(clip, video_id, stored):
  """Checks a centre-cropped, unflipped rgb clip [T, ...] -> its frame indices."""
  indices, offset, flipped = check_rgb_clip(clip, stored, video_id)
  height, width = stored_size(video_id, stored)
  assert not flipped and offset == ((height - CROP) // 2, (width - CROP) // 2)
  return indices


def rgb_split(tmp_path_factory):
  """The rgb split (3 shards, chunks of 3 frames): (DatasetSplit, stored videos)."""
  return write_split(tmp_path_factory, 'rgb_clips', RGB_VIDEOS, 'rgb', num_shards=3,
                     chunk_frames=3)


def flow_split(tmp_path_factory):
  """The flow split (2 shards, chunks of 2 frames): (DatasetSplit, stored videos)."""
  return write_split(tmp_path_factory, 'flow_clips', FLOW_VIDEOS, 'flow', num_shards=2,
                     chunk_frames=2)
