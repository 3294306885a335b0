"""The clip pipeline on tiny clip records: sampling, looping, crops, flips, flow, order, seeds.

Every frame encodes what it is and where it was cut from. rgb frame i: red = 6 * i
everywhere, green = 4 * column, blue = 4 * row. flow frame i: u = 100 + 3 * i everywhere,
v = 4 * column. Output clips are read back to (frame index, crop offset, flip) from those
values and then compared pixel by pixel with Pillow's decode of the stored JPEG, cropped and
flipped in NumPy.
"""

import collections
import dataclasses
import types

import numpy as np
import pytest

from datasets.inputs import clip_decode, clip_reader
from datasets.inputs.input_settings import Sampling
from tf_compat import tf
from tests.datasets.inputs.clip_records import (CROP, TOLERANCE, RGB_VIDEOS, RESIZED,
                                                FLOW_VIDEOS, assert_loops, batches_of,
                                                check_rgb_clip, eval_results, evaluation,
                                                flipped_frame, pil, pixel_values, training)


# rgb, flow: tests/datasets/inputs/conftest.py (clip_records' splits, written once).


@pytest.fixture(scope='module')
def rgb_training_batches(rgb):
  """The first 30 batches (120 clips) of the rgb split's training pipeline as `training`
  makes it (seed 1), read once for the module: the same seeded pipeline gives the same
  batches, so tests that read its first few take them from here. Read-only."""
  return batches_of(training(rgb[0]), limit=30)


def test_training_shapes_dtypes_and_range(rgb, rgb_training_batches):
  split, _ = rgb
  with tf.Graph().as_default():
    clips, labels = tf.data.make_one_shot_iterator(training(split)()).get_next()
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
      indices, offset, flipped = check_rgb_clip(clip, stored[video_id], video_id)
      length = RGB_VIDEOS[video_id][1]
      assert_loops(indices, indices[0], length)
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
  for clips, labels in batches_of(training(split, batch_size=2, clip_frames=6), limit=12):
    assert clips.shape == (2, 6, CROP, CROP, 2) and clips.min() >= -1 and clips.max() <= 1
    for clip, label in zip(clips, labels):
      video_id = 'f%d' % label
      frames = stored[video_id][1]
      pixels = pixel_values(clip)
      flipped = flipped_frame(pixels[0])
      assert all(flipped_frame(frame) == flipped for frame in pixels)
      flips.add(flipped)
      v = pixels[..., 1][:, :, ::-1] if flipped else pixels[..., 1]
      x = int(round(np.mean(v - 4.0 * np.arange(CROP)) / 4.0))
      u = pixels[..., 0].mean(axis=(1, 2))
      indices = np.round(((255.0 - u) if flipped else u) / 3.0 - 100.0 / 3.0).astype(int)
      assert_loops(indices, indices[0], FLOW_VIDEOS[video_id][1])
      for frame, index in zip(clip, indices):
        # u and v are constant down the columns, so rows 0..CROP stand for any crop row.
        u_ref, v_ref = (pil(jpeg)[:CROP, x:x + CROP] for jpeg in frames[index])
        if flipped:
          np.testing.assert_allclose(frame[..., 0], -(u_ref[:, ::-1] / 127.5 - 1.0),
                                     atol=TOLERANCE / 127.5)
          u_ref, v_ref = 255.0 - u_ref[:, ::-1], v_ref[:, ::-1]
        np.testing.assert_allclose(pixel_values(frame), np.stack([u_ref, v_ref], -1),
                                   atol=TOLERANCE)
  assert flips == {False, True}


def test_flow_scaling_is_flow_over_20(flow):
  """Stored u = 100 + 3 i is flow (100 + 3 i) * 40 / 255 - 20; the output is that / 20."""
  (clips, labels, _), = batches_of(evaluation(split=flow[0], modality='flow', batch_size=2,
                                             eval_frames=2))
  for clip, label in zip(clips, labels):
    flow_u = (100.0 + 3.0 * np.arange(2)) * 40.0 / 255.0 - 20.0
    np.testing.assert_allclose(clip[:, :, :, 0].mean(axis=(1, 2)), flow_u / 20.0,
                               atol=TOLERANCE / 127.5)
    assert label in (0, 1)


def test_same_seed_same_batches_other_seed_differs(rgb, rgb_training_batches):
  split, _ = rgb
  first = rgb_training_batches[:4]   # seed 1, read once for the module
  again, other = (batches_of(training(split, seed=seed), limit=4) for seed in (1, 6))
  for batch, batch_again in zip(first, again):
    np.testing.assert_array_equal(batch[0], batch_again[0])
    np.testing.assert_array_equal(batch[1], batch_again[1])
  assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, other))


def test_no_seed_is_random(rgb):
  split, _ = rgb
  first, again = (batches_of(training(split, seed=None), limit=3) for _ in range(2))
  assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, again))


def test_worker_shards_are_disjoint_and_complete(rgb):
  split, _ = rgb
  parts = [set(eval_results(split, eval_frames=2, num_shards=3, shard_index=index))
           for index in range(3)]
  assert [len(part) for part in parts] == [1, 2, 2]  # write_shards' chunks of 5 records
  assert set.union(*parts) == set(RGB_VIDEOS)
  assert sum(len(part) for part in parts) == len(RGB_VIDEOS)


def test_training_shards_read_only_their_files(rgb):
  split, _ = rgb
  labels = {int(label) for _, batch_labels in batches_of(training(split, num_shards=3,
                                                                 shard_index=0), limit=3)
            for label in batch_labels}
  assert labels == {0}  # shard 0 of 3 holds only v0


def test_labels_offset(rgb):
  split, _ = rgb
  results = eval_results(split, eval_frames=1, labels_offset=1)
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
    evaluation(rgb[0], **overrides)()


def test_evaluation_sampling_is_refused_in_training(rgb):
  with tf.Graph().as_default(), pytest.raises(ValueError, match='sampling=first 4 frames.* '
                                                               'is_training=True'):
    training(rgb[0], clip_frames=4, sampling=Sampling.first_frames(4, CROP))()


def test_modality_must_match_the_split(rgb):
  split = types.SimpleNamespace(**dict(dataclasses.asdict(rgb[0]), modality='rgb'))
  with tf.Graph().as_default(), pytest.raises(ValueError, match="modality='flow' .* 'rgb'"):
    evaluation(split, modality='flow')()


def test_works_on_the_cpu_device(rgb):
  split, _ = rgb
  with tf.Graph().as_default(), tf.device('/device:CPU:0'), tf.Session() as sess:
    clips, _ = tf.data.make_one_shot_iterator(training(split)()).get_next()
    assert sess.run(clips).shape == (4, 8, CROP, CROP, 3)


@pytest.mark.parametrize('fixture', ['rgb', 'flow'])
def test_deferred_training_clips_finished_by_the_consumer_equal_finished_clips(fixture,
                                                                               request):
  """Deferring the scaling and flip changes where they run, not one value of any clip."""
  split, _ = request.getfixturevalue(fixture)
  modality = split.modality
  finished = (request.getfixturevalue('rgb_training_batches')[:4] if fixture == 'rgb'
              else batches_of(training(split), limit=4))
  deferred = batches_of(training(split, deferred=True), limit=4)
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


def test_repeat_first_frame_removes_motion(rgb, rgb_training_batches):
  """Training and evaluation clips: every frame equals the clip's first frame."""
  split, _ = rgb
  for batch in (batches_of(training(split, repeat_first_frame=True), limit=2)
                + batches_of(evaluation(split, eval_clips=2, repeat_first_frame=True))):
    clips = batch[0]
    np.testing.assert_array_equal(clips, np.broadcast_to(clips[..., :1, :, :, :],
                                                         clips.shape))
  moving = rgb_training_batches[0][0]
  assert not np.array_equal(moving, np.broadcast_to(moving[:, :1], moving.shape))


def test_random_flip_off_never_flips(rgb, flow):
  for split, _ in (rgb, flow):
    deferred = batches_of(training(split, deferred=True, random_flip=False), limit=4)
    for _, _, flips in deferred:
      assert not flips.any()
    finished = batches_of(training(split, random_flip=False), limit=2)
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
    training(split)()
    evaluation(split)()
  assert statuses == [ag_ctx.Status.DISABLED] * 2
