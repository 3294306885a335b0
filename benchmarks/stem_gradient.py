"""I3D's stem filter gradient: TensorFlow's CPU kernel against space-to-depth.

    python -m benchmarks.stem_gradient                       # the demo's and recipes' shapes
    python -m benchmarks.stem_gradient --rounds=5 --widths=16,64

Times d loss / d weights of `Conv3d_1a_7x7` (7x7x7, stride 2, SAME, 3 channels) for
each input shape and output width: `Conv3DBackpropFilterV2` as TensorFlow registers it,
then `nets.strided_filter_grad.space_to_depth_filter_grad`, alternating over
`--rounds` rounds in one process (inputs are variables, so nothing is constant-folded).
Prints one JSON line per case with medians and the median per-round ratio, and a machine
line. Run from the repository root. Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform
import statistics
import time

import tf_compat  # pylint: disable=unused-import  (first: TF set-up before anything else)
from absl import app, flags
import numpy as np

from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from nets.strided_filter_grad import space_to_depth_filter_grad
from tf_compat import tf

TAPS, STRIDES = [7, 7, 7], [2, 2, 2]


@dataclasses.dataclass(frozen=True)
class StemSettings:
  """What the stem-gradient benchmark times; `check_settings` holds its rule."""
  clips: tuple[str, ...] = param(('8x8x64x64', '8x16x112x112'),
                                 'Input shapes BATCHxFRAMESxHEIGHTxWIDTH (RGB).')
  widths: tuple[int, ...] = param((16, 64), 'Output widths of the stem conv (64 x the '
                                  'depth multiplier).')
  rounds: int = param(3, 'Alternating rounds; medians are reported.')


define_flags(StemSettings)
FLAGS = flags.FLAGS


def parse_clip(text):
  """'8x8x64x64' -> [8, 8, 64, 64]; ConfigError naming --clips otherwise."""
  try:
    shape = [int(part) for part in text.split('x')]
  except ValueError:
    shape = []
  if len(shape) != 4 or min(shape) < 1:
    raise errors.ConfigError(f'--clips={text!r} is not BATCHxFRAMESxHEIGHTxWIDTH of '
                             'positive integers, e.g. 8x8x64x64')
  return shape


def check_settings(settings):
  """Returns `settings` if every shape parses and widths and rounds are positive."""
  for clip in settings.clips:
    parse_clip(clip)
  if not settings.widths or min(settings.widths) < 1:
    raise errors.ConfigError(f'--widths={",".join(map(str, settings.widths))} needs '
                             'positive output widths, e.g. 16,64')
  if settings.rounds < 1:
    raise errors.ConfigError(f'--rounds={settings.rounds} must be at least 1')
  return settings


def _gradients(clip, width):
  """(graph, TF's filter gradient, space-to-depth's) of the stem at `clip`, `width`."""
  graph = tf.Graph()
  with graph.as_default():
    rng = np.random.RandomState(0)
    inputs = tf.Variable(rng.randn(*clip, 3).astype(np.float32))
    weights = tf.Variable(rng.randn(*TAPS, 3, width).astype(np.float32))
    out = tf.nn.conv3d(inputs, weights, [1, *STRIDES, 1], 'SAME')
    out_grad = tf.Variable(rng.randn(*out.shape.as_list()).astype(np.float32))
    kernel = tf.raw_ops.Conv3DBackpropFilterV2(
        input=inputs, filter_sizes=TAPS + [3, width], out_backprop=out_grad,
        strides=[1, *STRIDES, 1], padding='SAME')
    blocked = space_to_depth_filter_grad(inputs, TAPS + [3, width], out_grad, STRIDES, 'SAME')
    init = tf.global_variables_initializer()
  return graph, init, {'tf_kernel': kernel, 'space_to_depth': blocked}


def _timed(session, tensor):
  start = time.perf_counter()
  session.run(tensor.op)
  return time.perf_counter() - start


def measure(clip, width, rounds):
  """One JSON-ready dict: median seconds of each form and the median ratio."""
  graph, init, forms = _gradients(clip, width)
  samples = {name: [] for name in forms}
  with tf.Session(graph=graph) as session:
    session.run(init)
    difference = np.abs(np.subtract(*session.run(list(forms.values())))).max()
    for _ in range(rounds):
      for name, tensor in forms.items():
        samples[name].append(_timed(session, tensor))
  ratios = [k / s for k, s in zip(samples['tf_kernel'], samples['space_to_depth'])]
  return {'clip': 'x'.join(map(str, clip)), 'width': width,
          **{f'{name}_secs': round(statistics.median(s), 4) for name, s in samples.items()},
          'median_speedup': round(statistics.median(ratios), 1),
          'max_abs_difference': float(difference)}


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(StemSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  for clip in settings.clips:
    for width in settings.widths:
      print(json.dumps(measure(parse_clip(clip), width, settings.rounds)), flush=True)
  print('machine: %s, %d cores, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__))
  return errors.OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
