"""Half precision on a CPU: one convolution's kernels in float32, bfloat16 and float16.

    python -m benchmarks.half_precision              # the shape of 2026-11-28's report
    python -m benchmarks.half_precision --rounds=1 --calls=1   # on an AVX-512 FP16 CPU

On an Intel Xeon with AVX-512 FP16 (Sapphire Rapids on) the default shape's float16 weight
gradient takes about 52 s a call: the defaults (6 rounds of 3 calls) would take 15
minutes there, the second line about 2.

Times, in a tf.compat.v1 session as training runs them, a convolution's forward pass
(Conv2D), its weight gradient (Conv2DBackpropFilter) and its input gradient
(Conv2DBackpropInput) on an NHWC input of `--input_shape` with a `--kernel_size` filter to
`--filters` channels (SAME), and a MatMul of the flattened input, in each dtype: the
doctor's alternating rounds, each figure a median, each ratio the median of the per-round
ratios to float32 of the same op. Which kernels run depends on the CPU (oneDNN's where it
supports the dtype: float16 only with AVX-512 FP16 or AMX-FP16; Eigen's elsewhere) and on
TF_ENABLE_ONEDNN_OPTS, so the machine line names the CPU and oneDNN's setting. This is
where the warning of `deployment.session.precision_options.half_precision_device_warning`
gets its figures (docs/benchmarks.md, "Half precision on a CPU").
Run from the repository root. Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform
import statistics

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags

from core import errors
from core.errors import require
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from tf_compat import tf
from training.doctor import rounds

DTYPES = ('float32', 'bfloat16', 'float16')
OPS = ('Conv2D', 'Conv2DBackpropFilter', 'Conv2DBackpropInput', 'MatMul')


@dataclasses.dataclass(frozen=True)
class HalfPrecisionSettings:
  """The convolution timed; `check_settings` holds its rule."""
  input_shape: tuple[int, ...] = param((32, 28, 28, 32), 'NHWC input of the convolution.')
  kernel_size: int = param(5, 'Height and width of the square filter.')
  filters: int = param(64, 'Output channels.')
  calls: int = param(3, 'Timed calls of each op per round.')
  rounds: int = param(5, 'Alternating rounds after a warm-up one; medians are reported.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).


def check_settings(settings):
  """Returns settings; raises ConfigError naming the flag."""
  require(len(settings.input_shape) == 4 and min(settings.input_shape) > 0,
          '--input_shape=%s must be 4 positive sizes (batch, height, width, channels)'
          % ','.join(map(str, settings.input_shape)))
  for name in ('kernel_size', 'filters', 'calls', 'rounds'):
    require(getattr(settings, name) > 0, '--%s=%d must be > 0' % (name,
                                                                  getattr(settings, name)))
  return settings


def _ops(settings, dtype):
  """{op name: the op's output tensor} on random inputs cast to `dtype`, in the default
  graph (variables-free: the inputs are constants made once)."""
  batch, height, width, channels = settings.input_shape
  size, filters = settings.kernel_size, settings.filters
  inputs = tf.cast(tf.random.normal(settings.input_shape, seed=1), dtype)
  kernel = tf.cast(tf.random.normal([size, size, channels, filters], seed=2), dtype)
  grads = tf.cast(tf.random.normal([batch, height, width, filters], seed=3), dtype)
  inputs, kernel, grads = (tf.Variable(t, trainable=False) for t in (inputs, kernel, grads))
  conv = dict(strides=[1, 1, 1, 1], padding='SAME')
  flat = tf.reshape(inputs, [batch, -1])
  return {
      'Conv2D': tf.raw_ops.Conv2D(input=inputs, filter=kernel, **conv),
      'Conv2DBackpropFilter': tf.raw_ops.Conv2DBackpropFilter(
          input=inputs, filter_sizes=[size, size, channels, filters], out_backprop=grads,
          **conv),
      'Conv2DBackpropInput': tf.raw_ops.Conv2DBackpropInput(
          input_sizes=settings.input_shape, filter=kernel, out_backprop=grads, **conv),
      'MatMul': tf.matmul(flat, flat, transpose_b=True),
  }


def compare(settings):
  """Times every op in every dtype in alternating rounds; prints and returns one dict per
  (op, dtype) with its median seconds and median ratio to float32, then a machine line."""
  measures, sessions = {}, []
  for dtype in DTYPES:
    graph = tf.Graph()
    with graph.as_default():
      ops = _ops(settings, tf.as_dtype(dtype))
      init = tf.global_variables_initializer()
    session = tf.Session(graph=graph)
    session.run(init)
    sessions.append(session)
    for name, op in ops.items():
      # The op alone: run, its output not copied out of the session.
      measures[(name, dtype)] = (lambda _, s=session, f=op.op:
                                 rounds.seconds_per_call(lambda: s.run(f), settings.calls))
  found = rounds.alternate(measures, settings.rounds, flip=True).samples
  lines = []
  for name in OPS:
    for dtype in DTYPES:
      median, _ = rounds.median_ratio(found[(name, dtype)], found[(name, 'float32')])
      lines.append({'op': name, 'dtype': dtype,
                    'ms': round(1e3 * statistics.median(found[(name, dtype)]), 2),
                    'ratio_to_float32': median})
      print(json.dumps(lines[-1]))
  for session in sessions:
    session.close()
  print('machine: %s, %s, %d cores, oneDNN %s, Python %s, TensorFlow %s' % (
      _cpu_model(), platform.machine(), os.cpu_count(),
      'off' if os.environ.get('TF_ENABLE_ONEDNN_OPTS') == '0' else 'on',
      platform.python_version(), tf.__version__))
  return lines


def _cpu_model():
  try:
    with open('/proc/cpuinfo') as stream:
      for line in stream:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or 'unknown CPU'


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(HalfPrecisionSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  compare(settings)
  return errors.OK


if __name__ == '__main__':
  define_flags(HalfPrecisionSettings)
  app.run(main, flags_parser=parse_flags)
