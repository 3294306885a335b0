"""How a video record stores optical flow: two grey JPEG planes (u, v) of uint8 pixels.

pixel = round((clip(flow, -20, 20) + 20) * 255 / 40), so 0..255 spans -20..20 pixels per
frame and readers scale back to [-1, 1] with pixel / 127.5 - 1 (`inputs/clip_input.py`).
NumPy only: the converter's spawned workers import it without TensorFlow.
"""

import numpy as np

__all__ = ['FLOW_BOUND', 'flow_to_uint8']

FLOW_BOUND = 20.0   # flow is clipped to [-FLOW_BOUND, FLOW_BOUND] pixels per frame


def flow_to_uint8(flow):
  """float flow [..., 2] (pixels/frame) -> uint8 [..., 2]; 0..255 spans -20..20."""
  clipped = np.clip(flow, -FLOW_BOUND, FLOW_BOUND)
  return np.round((clipped + FLOW_BOUND) * (255.0 / (2 * FLOW_BOUND))).astype(np.uint8)
