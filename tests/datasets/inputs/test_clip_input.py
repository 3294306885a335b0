"""The clip pipeline on tiny clip records: sampling, looping, crops, flips, flow, order, seeds.

Every frame encodes what it is and where it was cut from. rgb frame i: red = 6 * i
everywhere, green = 4 * column, blue = 4 * row. flow frame i: u = 100 + 3 * i everywhere,
v = 4 * column. Output clips are read back to (frame index, crop offset, flip) from those
values and then compared pixel by pixel with Pillow's decode of the stored JPEG, cropped and
flipped in NumPy.
"""

import collections
import dataclasses
import io
import types

import numpy as np
import pytest
from PIL import Image

from datasets.conversion import video_shards
from datasets.formats import dataset_split, shards, video_records
from datasets.inputs import clip_decode, clip_input, clip_reader
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


def _jpeg(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='JPEG', quality=95, subsampling=0)
  return buffer.getvalue()


def _pil(encoded):
  with Image.open(io.BytesIO(encoded)) as image:
    return np.asarray(image).astype(np.float32)


def _rgb_frame(index, height, width):
  rows, cols = np.mgrid[:height, :width]
  return np.stack([np.full_like(rows, 6 * index), 4 * cols, 4 * rows], -1).astype(np.uint8)


def _flow_frame(index, height, width):
  u = np.full((height, width), 100 + 3 * index, np.uint8)
  v = np.tile((4 * np.arange(width)).astype(np.uint8), (height, 1))
  return _jpeg(u), _jpeg(v)


def _split(directory, name, num_videos, num_classes, modality, num_shards):
  fields = dict(name=name, split_name='train', dataset_dir=directory,
                file_pattern=shards.shard_file_pattern(directory, 'train', num_shards),
                num_samples=num_videos, num_classes=num_classes,
                labels_to_names={i: 'class%d' % i for i in range(num_classes)},
                num_channels=video_records.MODALITIES[modality])
  if 'modality' in {field.name for field in dataclasses.fields(dataset_split.DatasetSplit)}:
    fields['modality'] = modality
  return dataset_split.DatasetSplit(**fields)


def _write(tmp_path_factory, name, videos, modality, num_shards, chunk_frames):
  """-> (DatasetSplit, {video id: (label, [stored frames], height, width)}); small chunks,
  so that clips cross chunk bounds and the last chunk of a video is short."""
  directory = str(tmp_path_factory.mktemp(name))
  stored, records = {}, []
  for video_id, (label, length, height, width) in sorted(videos.items()):
    if modality == 'rgb':
      frames = [_jpeg(_rgb_frame(i, height, width)) for i in range(length)]
    else:
      frames = [_flow_frame(i, height, width) for i in range(length)]
    stored[video_id] = (label, frames, height, width)
    header = video_records.VideoHeader(
        modality=modality, label=label, label_string='class%d' % label, video_id=video_id,
        data_path='%s.avi' % video_id, height=height, width=width, frame_rate=25.0)
    records.append(video_shards.chunk_video(frames, header, chunk_frames))
  for index in range(num_shards):  # contiguous runs of videos, as the converter cuts them
    part = records[index * len(records) // num_shards:(index + 1) * len(records) // num_shards]
    video_shards.write_video_shard(part, directory, 'train', index, num_shards)
  return _split(directory, name, len(videos), len(videos), modality, num_shards), stored


@pytest.fixture(scope='module')
def rgb(tmp_path_factory):
  return _write(tmp_path_factory, 'rgb_clips', RGB_VIDEOS, 'rgb', num_shards=3,
                chunk_frames=3)


@pytest.fixture(scope='module')
def flow(tmp_path_factory):
  return _write(tmp_path_factory, 'flow_clips', FLOW_VIDEOS, 'flow', num_shards=2,
                chunk_frames=2)


def _batches(make_dataset, limit=None):
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


@pytest.fixture(scope='module')
def rgb_training_batches(rgb):
  """The first 30 batches (120 clips) of the rgb split's training pipeline as `_training`
  makes it (seed 1), read once for the module: the same seeded pipeline gives the same
  batches, so tests that read its first few take them from here. Read-only."""
  return _batches(_training(rgb[0]), limit=30)


def _training(split, **overrides):
  fields = dict(batch_size=4, clip_frames=8, image_size=CROP, num_readers=2,
                num_parallel_calls=2, shuffle_buffer_size=8, seed=1)
  fields.update(overrides)
  return lambda: clip_input.build_clip_dataset(split, InputSettings(**fields),
                                               is_training=True)


def _evaluation(split, eval_frames=None, eval_clips=None, **overrides):
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


def _pixels(clip):
  return (clip + 1.0) * 127.5


def _flipped(frame):
  """A frame's flip flag from the sign of its horizontal gradient (green, or flow v)."""
  return frame[:, -1, -1].mean() < frame[:, 0, -1].mean()


def _resized_gradients(x):
  """Green and blue [CROP, CROP] of v4 (24x30 resized to 32x40) cropped at (0, x).

  Bilinear resizing with half-pixel centres samples the source at (i + 0.5) * 24 / 32 - 0.5,
  clamped to the image; the source gradients are 4 * column and 4 * row.
  """
  rows = np.clip((np.arange(CROP) + 0.5) * 0.75 - 0.5, 0, 23)
  cols = np.clip((np.arange(CROP) + x + 0.5) * 0.75 - 0.5, 0, 29)
  return (np.broadcast_to(4 * cols[None, :], (CROP, CROP)),
          np.broadcast_to(4 * rows[:, None], (CROP, CROP)))


def _read_rgb_frame(frame, video_id):
  """rgb output frame [CROP, CROP, 3] in [-1, 1] -> (index, y, x, flipped)."""
  pixels = _pixels(frame)
  flipped = _flipped(pixels[..., :2])
  if flipped:
    pixels = pixels[:, ::-1]
  index = int(round(pixels[..., 0].mean() / 6.0))
  if video_id == RESIZED:
    errors = [np.abs(pixels[..., 1] - _resized_gradients(x)[0]).max() for x in range(9)]
    return index, 0, int(np.argmin(errors)), flipped
  steps = 4.0 * np.arange(CROP)
  x = np.mean(pixels[..., 1] - steps[None, :]) / 4.0
  y = np.mean(pixels[..., 2] - steps[:, None]) / 4.0
  return index, int(round(y)), int(round(x)), flipped


def _expected_rgb(stored, video_id, index, y, x, flipped):
  """The output frame's pixels from Pillow's decode (or the exact gradients if resized)."""
  if video_id == RESIZED:
    green, blue = _resized_gradients(x)
    crop = np.stack([np.full((CROP, CROP), 6.0 * index), green, blue], -1)
  else:
    crop = _pil(stored[1][index])[y:y + CROP, x:x + CROP]
  return crop[:, ::-1] if flipped else crop


def _check_rgb_clip(clip, stored, video_id):
  """Checks one clip [T, CROP, CROP, 3] -> (frame indices, (y, x), flipped)."""
  read = [_read_rgb_frame(frame, video_id) for frame in clip]
  indices = [index for index, _, _, _ in read]
  assert len({(y, x, flipped) for _, y, x, flipped in read}) == 1, read  # one crop and flip
  _, y, x, flipped = read[0]
  height, width = _stored_size(video_id, stored)
  assert 0 <= y <= height - CROP and 0 <= x <= width - CROP
  tolerance = RESIZE_TOLERANCE if video_id == RESIZED else TOLERANCE
  for frame, index in zip(clip, indices):
    np.testing.assert_allclose(_pixels(frame),
                               _expected_rgb(stored, video_id, index, y, x, flipped),
                               atol=tolerance)
  return indices, (y, x), flipped


def _stored_size(video_id, stored):
  """(height, width) after the pipeline's resizing: v4's 24x30 becomes 32x40."""
  return (CROP, 40) if video_id == RESIZED else (stored[2], stored[3])


def _assert_loops(indices, start, length):
  np.testing.assert_array_equal(indices, (start + np.arange(len(indices))) % length)


def test_training_shapes_dtypes_and_range(rgb, rgb_training_batches):
  split, _ = rgb
  with tf.Graph().as_default():
    clips, labels = tf.data.make_one_shot_iterator(_training(split)()).get_next()
    assert clips.shape.as_list() == [4, 8, CROP, CROP, 3] and clips.dtype == tf.float32
    assert labels.shape.as_list() == [4] and labels.dtype == tf.int64
  for clips, labels in rgb_training_batches[:3]:
    assert clips.min() >= -1.0 and clips.max() <= 1.0
    assert set(labels.tolist()) <= set(range(5))


def test_training_clips_loop_with_one_crop_and_one_flip(rgb, rgb_training_batches):
  split, stored = rgb
  ids = {label: video_id for video_id, (label, _, _, _) in RGB_VIDEOS.items()}
  starts, offsets, flips = (collections.defaultdict(set) for _ in range(3))
  for clips, labels in rgb_training_batches:  # 120 clips, 24 per video
    for clip, label in zip(clips, labels):
      video_id = ids[label]
      indices, offset, flipped = _check_rgb_clip(clip, stored[video_id], video_id)
      length = RGB_VIDEOS[video_id][1]
      _assert_loops(indices, indices[0], length)
      starts[video_id].add(indices[0])
      offsets[video_id].add(offset)
      flips[video_id].add(flipped)
  assert set(starts) == set(RGB_VIDEOS)
  assert starts['v0'] == {0}                   # a 1-frame video: 8 copies of frame 0
  assert len(starts['v3']) > 5 and len(starts['v2']) > 5  # new starts every epoch
  assert all(flips[video_id] == {False, True} for video_id in RGB_VIDEOS)
  assert len(offsets['v1']) > 5 and len(offsets['v3']) > 5
  assert len(offsets[RESIZED]) > 3  # x in 0..8 of the 32x40 resized frames


def test_flow_training_flip_negates_u(flow):
  split, stored = flow
  flips = set()
  for clips, labels in _batches(_training(split, batch_size=2, clip_frames=6), limit=12):
    assert clips.shape == (2, 6, CROP, CROP, 2) and clips.min() >= -1 and clips.max() <= 1
    for clip, label in zip(clips, labels):
      video_id = 'f%d' % label
      frames = stored[video_id][1]
      pixels = _pixels(clip)
      flipped = _flipped(pixels[0])
      assert all(_flipped(frame) == flipped for frame in pixels)
      flips.add(flipped)
      v = pixels[..., 1][:, :, ::-1] if flipped else pixels[..., 1]
      x = int(round(np.mean(v - 4.0 * np.arange(CROP)) / 4.0))
      u = pixels[..., 0].mean(axis=(1, 2))
      indices = np.round(((255.0 - u) if flipped else u) / 3.0 - 100.0 / 3.0).astype(int)
      _assert_loops(indices, indices[0], FLOW_VIDEOS[video_id][1])
      for frame, index in zip(clip, indices):
        # u and v are constant down the columns, so rows 0..CROP stand for any crop row.
        u_ref, v_ref = (_pil(jpeg)[:CROP, x:x + CROP] for jpeg in frames[index])
        if flipped:
          np.testing.assert_allclose(frame[..., 0], -(u_ref[:, ::-1] / 127.5 - 1.0),
                                     atol=TOLERANCE / 127.5)
          u_ref, v_ref = 255.0 - u_ref[:, ::-1], v_ref[:, ::-1]
        np.testing.assert_allclose(_pixels(frame), np.stack([u_ref, v_ref], -1),
                                   atol=TOLERANCE)
  assert flips == {False, True}


def test_flow_scaling_is_flow_over_20(flow):
  """Stored u = 100 + 3 i is flow (100 + 3 i) * 40 / 255 - 20; the output is that / 20."""
  (clips, labels, _), = _batches(_evaluation(split=flow[0], modality='flow', batch_size=2,
                                             eval_frames=2))
  for clip, label in zip(clips, labels):
    flow_u = (100.0 + 3.0 * np.arange(2)) * 40.0 / 255.0 - 20.0
    np.testing.assert_allclose(clip[:, :, :, 0].mean(axis=(1, 2)), flow_u / 20.0,
                               atol=TOLERANCE / 127.5)
    assert label in (0, 1)


def _eval_results(split, **overrides):
  """-> {video id: (label, clips)} from one evaluation pass, checking each id appears once."""
  results = {}
  for clips, labels, video_ids in _batches(_evaluation(split, **overrides)):
    for clip, label, video_id in zip(clips, labels, video_ids):
      video_id = video_id.decode()
      assert video_id not in results
      results[video_id] = (label, clip)
  return results


def _check_centre_rgb_clip(clip, video_id, stored):
  """Checks a centre-cropped, unflipped rgb clip [T, ...] -> its frame indices."""
  indices, offset, flipped = _check_rgb_clip(clip, stored, video_id)
  height, width = _stored_size(video_id, stored)
  assert not flipped and offset == ((height - CROP) // 2, (width - CROP) // 2)
  return indices


def test_eval_first_frames_once_per_video_centre_crop(rgb):
  split, stored = rgb
  results = _eval_results(split, eval_frames=12)
  assert sorted(results) == sorted(RGB_VIDEOS)
  for video_id, (label, clip) in results.items():
    assert clip.shape == (12, CROP, CROP, 3) and label == RGB_VIDEOS[video_id][0]
    indices = _check_centre_rgb_clip(clip, video_id, stored[video_id])
    _assert_loops(indices, 0, RGB_VIDEOS[video_id][1])


def test_eval_clips_spread_uniformly_and_kept_together(rgb):
  split, stored = rgb
  results = _eval_results(split, eval_clips=3, clip_frames=8)
  assert sorted(results) == sorted(RGB_VIDEOS)
  expected_starts = {'v0': [0, 0, 0], 'v1': [0, 0, 0], 'v2': [0, 4, 8], 'v3': [0, 16, 32],
                     'v4': [0, 0, 0]}  # floor(k * max(n - 8, 0) / 2)
  for video_id, (label, clips) in results.items():
    assert clips.shape == (3, 8, CROP, CROP, 3) and label == RGB_VIDEOS[video_id][0]
    for clip, start in zip(clips, expected_starts[video_id]):
      # The label is per video and every clip's frames come from that video (red code).
      _assert_loops(_check_centre_rgb_clip(clip, video_id, stored[video_id]), start,
                    RGB_VIDEOS[video_id][1])


def test_eval_defaults_to_one_clip_in_a_fixed_order(rgb):
  split, _ = rgb
  with tf.Graph().as_default():
    shapes = tf.data.get_output_shapes(_evaluation(split, drop_remainder=True)())
    assert [shape.as_list() for shape in shapes] == [[2, 1, 8, CROP, CROP, 3], [2], [2]]
  first, again = (_batches(_evaluation(split)) for _ in range(2))
  assert sum(len(ids) for _, _, ids in first) == len(RGB_VIDEOS)  # num_epochs defaults to 1
  for (clips, labels, ids), (clips_again, labels_again, ids_again) in zip(first, again):
    np.testing.assert_array_equal(ids, ids_again)
    np.testing.assert_array_equal(labels, labels_again)
    np.testing.assert_array_equal(clips, clips_again)


def test_flow_eval_has_two_centre_cropped_channels(flow):
  split, stored = flow
  results = _eval_results(split, eval_clips=2, clip_frames=4)
  assert sorted(results) == ['f0', 'f1']
  for video_id, (_, clips) in results.items():
    _, frames, height, width = stored[video_id]
    y, x = (height - CROP) // 2, (width - CROP) // 2
    starts = [0, max(FLOW_VIDEOS[video_id][1] - 4, 0)]
    for clip, start in zip(clips, starts):
      for offset, frame in enumerate(clip):
        u, v = (_pil(jpeg)[y:y + CROP, x:x + CROP]
                for jpeg in frames[(start + offset) % len(frames)])
        np.testing.assert_allclose(_pixels(frame), np.stack([u, v], -1), atol=TOLERANCE)


def test_same_seed_same_batches_other_seed_differs(rgb):
  split, _ = rgb
  first, again, other = (_batches(_training(split, seed=seed), limit=4) for seed in (5, 5, 6))
  for batch, batch_again in zip(first, again):
    np.testing.assert_array_equal(batch[0], batch_again[0])
    np.testing.assert_array_equal(batch[1], batch_again[1])
  assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, other))


def test_no_seed_is_random(rgb):
  split, _ = rgb
  first, again = (_batches(_training(split, seed=None), limit=3) for _ in range(2))
  assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, again))


def test_worker_shards_are_disjoint_and_complete(rgb):
  split, _ = rgb
  parts = [set(_eval_results(split, eval_frames=2, num_shards=3, shard_index=index))
           for index in range(3)]
  assert [len(part) for part in parts] == [1, 2, 2]  # write_shards' chunks of 5 records
  assert set.union(*parts) == set(RGB_VIDEOS)
  assert sum(len(part) for part in parts) == len(RGB_VIDEOS)


def test_training_shards_read_only_their_files(rgb):
  split, _ = rgb
  labels = {int(label) for _, batch_labels in _batches(_training(split, num_shards=3,
                                                                 shard_index=0), limit=3)
            for label in batch_labels}
  assert labels == {0}  # shard 0 of 3 holds only v0


def test_labels_offset(rgb):
  split, _ = rgb
  results = _eval_results(split, eval_frames=1, labels_offset=1)
  assert {video_id: label for video_id, (label, _) in results.items()} == {
      video_id: label - 1 for video_id, (label, _, _, _) in RGB_VIDEOS.items()}


@pytest.mark.parametrize('overrides, message', [
    ({'batch_size': 0}, 'batch_size=0'),
    ({'clip_frames': 0}, 'clip_frames=0'),
    ({'image_size': -1}, 'crop_size=-1'),
    ({'eval_frames': 4, 'eval_clips': 2}, 'one of eval_frames=4 and eval_clips=2 is set'),
    ({'eval_clips': 0}, 'eval_clips=0 .* positive integer'),
    ({'modality': 'depth'}, "modality='depth' .* use one of flow, rgb"),
    ({'num_shards': 4, 'shard_index': 0}, 'num_shards=4 .* has 3'),
    ({'shard_index': 1}, 'shard_index=1'),
])
def test_bad_arguments(rgb, overrides, message):
  with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
    _evaluation(rgb[0], **overrides)()


def test_evaluation_sampling_is_refused_in_training(rgb):
  with tf.Graph().as_default(), pytest.raises(ValueError, match='sampling=first 4 frames.* '
                                                               'is_training=True'):
    _training(rgb[0], clip_frames=4, sampling=Sampling.first_frames(4, CROP))()


def test_modality_must_match_the_split(rgb):
  split = types.SimpleNamespace(**dict(dataclasses.asdict(rgb[0]), modality='rgb'))
  with tf.Graph().as_default(), pytest.raises(ValueError, match="modality='flow' .* 'rgb'"):
    _evaluation(split, modality='flow')()


def test_works_on_the_cpu_device(rgb):
  split, _ = rgb
  with tf.Graph().as_default(), tf.device('/device:CPU:0'), tf.Session() as sess:
    clips, _ = tf.data.make_one_shot_iterator(_training(split)()).get_next()
    assert sess.run(clips).shape == (4, 8, CROP, CROP, 3)


@pytest.mark.parametrize('fixture', ['rgb', 'flow'])
def test_deferred_training_clips_finished_by_the_consumer_equal_finished_clips(fixture,
                                                                               request):
  """Deferring the scaling and flip changes where they run, not one value of any clip."""
  split, _ = request.getfixturevalue(fixture)
  modality = split.modality
  finished = (request.getfixturevalue('rgb_training_batches')[:4] if fixture == 'rgb'
              else _batches(_training(split), limit=4))
  deferred = _batches(_training(split, deferred=True), limit=4)
  with tf.Graph().as_default(), tf.Session() as sess:
    stored = tf.placeholder(tf.uint8, [None] * 5)
    flip_bits = tf.placeholder(tf.bool, [None])
    consumer = clip_decode.finish_clips(stored, modality, flip_bits)
    flipped_any = unflipped_any = False
    for (clips, labels), (raw, raw_labels, flips) in zip(finished, deferred):
      assert raw.dtype == np.uint8 and raw.shape == clips.shape and flips.dtype == bool
      np.testing.assert_array_equal(raw_labels, labels)
      # Equal up to float32 rounding (the fused graphs may order the ops differently).
      np.testing.assert_allclose(sess.run(consumer, {stored: raw, flip_bits: flips}),
                                 clips, rtol=0, atol=1e-6)
      # Independently: NumPy mirrors and scales the stored values.
      expected = raw / 127.5 - 1.0
      expected[flips] = expected[flips][:, :, :, ::-1]
      if modality == 'flow':
        expected[flips, ..., 0] *= -1
      np.testing.assert_allclose(expected, clips, rtol=0, atol=1e-6)
      flipped_any |= flips.any()
      unflipped_any |= (~flips).any()
  assert flipped_any and unflipped_any


def test_deferred_evaluation_clips_are_the_stored_values(rgb):
  split, _ = rgb
  finished = _batches(_evaluation(split, eval_clips=2))
  deferred = _batches(_evaluation(split, eval_clips=2, deferred=True))
  assert len(finished) == len(deferred)
  for (clips, labels, ids), (raw, raw_labels, raw_ids) in zip(finished, deferred):
    assert raw.dtype == np.uint8
    np.testing.assert_array_equal(raw_ids, ids)
    np.testing.assert_array_equal(raw_labels, labels)
    np.testing.assert_allclose(raw / 127.5 - 1.0, clips, rtol=0, atol=1e-6)


def test_repeat_first_frame_removes_motion(rgb, rgb_training_batches):
  """Training and evaluation clips: every frame equals the clip's first frame."""
  split, _ = rgb
  for batch in (_batches(_training(split, repeat_first_frame=True), limit=2)
                + _batches(_evaluation(split, eval_clips=2, repeat_first_frame=True))):
    clips = batch[0]
    np.testing.assert_array_equal(clips, np.broadcast_to(clips[..., :1, :, :, :],
                                                         clips.shape))
  moving = rgb_training_batches[0][0]
  assert not np.array_equal(moving, np.broadcast_to(moving[:, :1], moving.shape))


def test_random_flip_off_never_flips(rgb, flow):
  for split, _ in (rgb, flow):
    deferred = _batches(_training(split, deferred=True, random_flip=False), limit=4)
    for _, _, flips in deferred:
      assert not flips.any()
    finished = _batches(_training(split, random_flip=False), limit=2)
    for (clips, _), (raw, _, _) in zip(finished, deferred[:2]):
      np.testing.assert_allclose(raw / 127.5 - 1.0, clips, rtol=0, atol=1e-6)


def test_the_map_functions_are_traced_as_written(rgb, monkeypatch):
  """No AutoGraph rewrite of the training or evaluation map function or of what it calls
  (record_files.as_written): the chunks are read with AutoGraph's status DISABLED; a
  converted map function would call them with it ENABLED."""
  from tensorflow.python.autograph.core import ag_ctx  # pylint: disable=import-outside-toplevel
  split, _ = rgb
  statuses = []
  read_frames = clip_reader.read_frames

  def spy(*args, **kwargs):
    statuses.append(ag_ctx.control_status_ctx().status)
    return read_frames(*args, **kwargs)

  monkeypatch.setattr(clip_reader, 'read_frames', spy)
  with tf.Graph().as_default():
    _training(split)()
    _evaluation(split)()
  assert statuses == [ag_ctx.Status.DISABLED] * 2
