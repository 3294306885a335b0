"""Flow you can trust (issue 13, item 6): the direction and size of TV-L1 flow on known
translations, and a flipped clip's flow against the flow of the flipped video (the uint8
encoding's round trip: tests/datasets/formats/test_flow_encoding.py). References are the
translations themselves, not the code under test."""

import cv2
import numpy as np
import pytest

from datasets.conversion.video_frames import tvl1_flow
from datasets.formats.flow_encoding import flow_to_uint8
from datasets.inputs import clip_decode
from tf_compat import tf

SIZE, MARGIN = 64, 12   # flow is judged away from the borders the shift wraps around


def texture(seed=0):
  noise = np.random.RandomState(seed).rand(SIZE, SIZE).astype(np.float32)
  smooth = cv2.GaussianBlur(noise, (0, 0), 2.0)
  smooth = (smooth - smooth.min()) / (smooth.max() - smooth.min())
  return (smooth * 255).astype(np.uint8)


def translated(dx, dy, frames=4):
  """RGB frames [T, H, W, 3] of a texture moving (dx, dy) pixels per frame (sub-pixel
  shifts by bilinear warping)."""
  base = texture()
  out = []
  for t in range(frames):
    matrix = np.float32([[1, 0, dx * t], [0, 1, dy * t]])
    grey = cv2.warpAffine(base, matrix, (SIZE, SIZE), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REFLECT)
    out.append(np.stack([grey] * 3, axis=-1))
  return np.stack(out)


def interior(flow):
  return flow[:, MARGIN:-MARGIN, MARGIN:-MARGIN]


@pytest.mark.parametrize('dx, dy', [(2.0, 0.0), (0.0, 1.5), (-1.0, 2.5)])
def test_motion_right_and_down_gives_positive_u_and_v_of_the_right_size(dx, dy):
  flow = interior(tvl1_flow(translated(dx, dy)))
  assert np.median(flow[..., 0]) == pytest.approx(dx, abs=0.25)
  assert np.median(flow[..., 1]) == pytest.approx(dy, abs=0.25)


def test_a_flipped_clips_flow_is_the_flow_of_the_flipped_video():
  frames = translated(1.5, 0.5)
  stored = flow_to_uint8(tvl1_flow(frames))[np.newaxis]              # [1, T-1, H, W, 2]
  mirrored_video = np.ascontiguousarray(frames[:, :, ::-1])
  of_mirror = flow_to_uint8(tvl1_flow(mirrored_video))[np.newaxis]
  with tf.Graph().as_default(), tf.Session() as sess:
    flipped, reference = sess.run([
        clip_decode.finish_clips(tf.constant(stored), 'flow', tf.constant([True])),
        clip_decode.finish_clips(tf.constant(of_mirror), 'flow')])
  # In [-1, 1] units (1 = 20 px/frame): the two agree to a fraction of a pixel.
  difference = np.abs(interior(flipped[0]) - interior(reference[0]))
  assert np.median(difference) < 0.01
  assert np.median(flipped[0][:, MARGIN:-MARGIN, MARGIN:-MARGIN, 0]) < 0  # moved left
