"""The clip pipeline's evaluation side on tiny clip records (tests/datasets/inputs/clip_py):
the first frames or K clips per video, centre crops, one fixed order, flow's two channels,
the stored values of deferred clips (training: test_clip_input.py)."""

import numpy as np

from tf_compat import tf
from tests.datasets.inputs.clip_records import (CROP, TOLERANCE, RGB_VIDEOS, FLOW_VIDEOS,
                                                assert_loops, batches_of,
                                                check_centre_rgb_clip, eval_results,
                                                evaluation, pil, pixel_values)


# rgb, flow: tests/datasets/inputs/conftest.py (clip_records' splits, written once).


def test_eval_first_frames_once_per_video_centre_crop(rgb):
  split, stored = rgb
  results = eval_results(split, eval_frames=12)
  assert sorted(results) == sorted(RGB_VIDEOS)
  for video_id, (label, clip) in results.items():
    assert clip.shape == (12, CROP, CROP, 3) and label == RGB_VIDEOS[video_id][0]
    indices = check_centre_rgb_clip(clip, video_id, stored[video_id])
    assert_loops(indices, 0, RGB_VIDEOS[video_id][1])


def test_eval_clips_spread_uniformly_and_kept_together(rgb):
  split, stored = rgb
  results = eval_results(split, eval_clips=3, clip_frames=8)
  assert sorted(results) == sorted(RGB_VIDEOS)
  expected_starts = {'v0': [0, 0, 0], 'v1': [0, 0, 0], 'v2': [0, 4, 8], 'v3': [0, 16, 32],
                     'v4': [0, 0, 0]}  # floor(k * max(n - 8, 0) / 2)
  for video_id, (label, clips) in results.items():
    assert clips.shape == (3, 8, CROP, CROP, 3) and label == RGB_VIDEOS[video_id][0]
    for clip, start in zip(clips, expected_starts[video_id]):
      # The label is per video and every clip's frames come from that video (red code).
      assert_loops(check_centre_rgb_clip(clip, video_id, stored[video_id]), start,
                    RGB_VIDEOS[video_id][1])


def test_eval_defaults_to_one_clip_in_a_fixed_order(rgb):
  split, _ = rgb
  with tf.Graph().as_default():
    shapes = tf.data.get_output_shapes(evaluation(split, drop_remainder=True)())
    assert [shape.as_list() for shape in shapes] == [[2, 1, 8, CROP, CROP, 3], [2], [2]]
  first, again = (batches_of(evaluation(split)) for _ in range(2))
  assert sum(len(ids) for _, _, ids in first) == len(RGB_VIDEOS)  # num_epochs defaults to 1
  for (clips, labels, ids), (clips_again, labels_again, ids_again) in zip(first, again):
    np.testing.assert_array_equal(ids, ids_again)
    np.testing.assert_array_equal(labels, labels_again)
    np.testing.assert_array_equal(clips, clips_again)


def test_flow_eval_has_two_centre_cropped_channels(flow):
  split, stored = flow
  results = eval_results(split, eval_clips=2, clip_frames=4)
  assert sorted(results) == ['f0', 'f1']
  for video_id, (_, clips) in results.items():
    _, frames, height, width = stored[video_id]
    y, x = (height - CROP) // 2, (width - CROP) // 2
    starts = [0, max(FLOW_VIDEOS[video_id][1] - 4, 0)]
    for clip, start in zip(clips, starts):
      for offset, frame in enumerate(clip):
        u, v = (pil(jpeg)[y:y + CROP, x:x + CROP]
                for jpeg in frames[(start + offset) % len(frames)])
        np.testing.assert_allclose(pixel_values(frame), np.stack([u, v], -1), atol=TOLERANCE)


def test_deferred_evaluation_clips_are_the_stored_values(rgb):
  split, _ = rgb
  finished = batches_of(evaluation(split, eval_clips=2))
  deferred = batches_of(evaluation(split, eval_clips=2, deferred=True))
  assert len(finished) == len(deferred)
  for (clips, labels, ids), (raw, raw_labels, raw_ids) in zip(finished, deferred):
    assert raw.dtype == np.uint8
    np.testing.assert_array_equal(raw_ids, ids)
    np.testing.assert_array_equal(raw_labels, labels)
    np.testing.assert_allclose(raw / 127.5 - 1.0, clips, rtol=0, atol=1e-6)
