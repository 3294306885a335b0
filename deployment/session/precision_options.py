"""The precision and compilation flags, declared once for the entries that build a network.

Training, eval.py and export.py declare `mixed_precision` as a field under their own
`# Group.` comment and check it in their setup; training adds the loss-scale and XLA
fields:

    @dataclasses.dataclass(frozen=True)
    class TrainConfig:
      ...
      # Precision and compilation.
      mixed_precision: str = mixed_precision_param()
      loss_scale: float = loss_scale_param()
      loss_scale_growth_steps: int = loss_scale_growth_steps_param()
      xla: bool = xla_param()

    check_mixed_precision(config)        # in the entry's setup
    check_loss_scale(config)             # training only

What the flags do is `deployment.precision` (compute dtype, float32 variables),
`deployment.loss_scale` (float16's dynamic loss scaling) and `deployment.xla`. This module
imports no TensorFlow, so config modules can use it.
"""

from core.errors import require
from core.params import param

__all__ = ['PRECISIONS', 'HALF_PRECISIONS', 'DEFAULT_LOSS_SCALE',
           'DEFAULT_LOSS_SCALE_GROWTH_STEPS', 'mixed_precision_param', 'loss_scale_param',
           'loss_scale_growth_steps_param', 'xla_param', 'check_mixed_precision',
           'check_loss_scale', 'uses_loss_scale', 'half_precision_device_warning']

PRECISIONS = ('float32', 'float16', 'bfloat16')
HALF_PRECISIONS = PRECISIONS[1:]
DEFAULT_LOSS_SCALE = 2.0 ** 15          # TensorFlow's initial dynamic loss scale
DEFAULT_LOSS_SCALE_GROWTH_STEPS = 2000  # TensorFlow's increment period


def mixed_precision_param():
  """The `mixed_precision: str` field: float32 (off) by default."""
  return param('float32', 'Compute dtype of the network: float32 (off), float16 (with '
               'dynamic loss scaling when training) or bfloat16. Variables and checkpoints '
               'stay float32; logits and losses are float32.')


def loss_scale_param():
  """The `loss_scale: float` field (training, float16 only)."""
  return param(DEFAULT_LOSS_SCALE, '--mixed_precision=float16: the initial dynamic loss '
               'scale; it halves on every step whose gradients overflow (that step is '
               'skipped) and doubles after --loss_scale_growth_steps good steps.')


def loss_scale_growth_steps_param():
  """The `loss_scale_growth_steps: int` field (training, float16 only)."""
  return param(DEFAULT_LOSS_SCALE_GROWTH_STEPS, '--mixed_precision=float16: double the '
               'loss scale after this many steps in a row with finite gradients (0 = never '
               'grow).')


def xla_param():
  """The `xla: bool` field (training)."""
  return param(False, 'Compile each clone\'s forward and backward pass with XLA '
               '(tf.xla.experimental.jit_scope).')


def check_mixed_precision(config):
  """Raises ConfigError unless config.mixed_precision is one of PRECISIONS."""
  require(config.mixed_precision in PRECISIONS, '--mixed_precision=%s is not known; valid: '
          '%s' % (config.mixed_precision, ', '.join(PRECISIONS)))


def check_loss_scale(config):
  """Raises ConfigError unless the loss-scale fields are usable; call after
  check_mixed_precision."""
  require(1.0 <= config.loss_scale <= 2.0 ** 64, '--loss_scale=%r must be in [1, 2**64] '
          '(e.g. 32768)' % config.loss_scale)
  require(config.loss_scale_growth_steps >= 0, '--loss_scale_growth_steps=%d must be >= 0 '
          '(0 = never grow)' % config.loss_scale_growth_steps)


def uses_loss_scale(mixed_precision):
  """Whether a training in this precision scales its loss (float16 only: bfloat16 has
  float32's exponent range)."""
  return mixed_precision == 'float16'


def half_precision_device_warning(mixed_precision, device_type):
  """The one line an entry logs before its graph when the network would compute in float16
  on a CPU, or None.

  float16 is for GPUs. TensorFlow 2.21's CPU kernels for float16 convolutions are slow on
  every CPU, and which ones run depends on the CPU: oneDNN's on one with AVX-512 FP16 (an
  Intel Xeon from Sapphire Rapids on, where a convolution's weight gradient took 280x
  float32's time), Eigen's elsewhere (an AMD EPYC: 16x, the input gradient 21x);
  `python -m benchmarks.half_precision`, docs/benchmarks.md "Half precision on a CPU". It stays allowed, with this warning: a CPU is where a float16
  recipe's loss scaling and checkpoints are tried before a GPU job, and eval and export
  run only the forward pass (at most 2x). The decision is keyed on the device and the
  dtype, never on the CPU model, so it is the same on every host.
  """
  if mixed_precision != 'float16' or device_type != 'CPU':
    return None
  return ('--mixed_precision=float16 on a CPU: TensorFlow\'s float16 convolution gradients '
          'are slow on CPUs (16-21x float32\'s time on an AMD EPYC, 280x on an Intel Xeon '
          'with AVX-512 FP16, where a LeNet step took 30 s); float16 is for GPUs: on a CPU '
          'use --mixed_precision=bfloat16 (the same memory, float32\'s range, fast kernels) '
          'or float32')
