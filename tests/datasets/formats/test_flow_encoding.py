"""Flow stored as uint8: the encoding's round trip against clip_input's scaling, in NumPy."""

import numpy as np

from datasets.formats.flow_encoding import FLOW_BOUND, flow_to_uint8


def test_the_uint8_encoding_round_trips_within_its_quantisation():
  flow = np.random.RandomState(1).uniform(-30, 30, (3, 8, 8, 2)).astype(np.float32)
  stored = flow_to_uint8(flow)
  decoded = (stored.astype(np.float64) / 127.5 - 1.0) * FLOW_BOUND  # clip_input's scaling
  step = 2 * FLOW_BOUND / 255.0
  clipped = np.clip(flow, -FLOW_BOUND, FLOW_BOUND)
  assert np.abs(decoded - clipped).max() <= step / 2 + 1e-6
  assert stored.min() == 0 and stored.max() == 255  # the bounds are reachable
