"""The GPU memory flags, declared once for every entry that creates a session.

An entry's config class declares them as fields under its own `# Group.` comment, so each
keeps its --help groups, and checks them in its setup:

    @dataclasses.dataclass(frozen=True)
    class EvalConfig:
      ...
      # GPU memory.
      gpu_allow_growth: bool = gpu_allow_growth_param()
      gpu_memory_fraction: float = gpu_memory_fraction_param()

    check_gpu_options(config)                         # in the entry's setup
    tf.Session(config=session_config_for(config))     # deployment.session.session_config

Without them TensorFlow maps all free memory of every visible GPU into the process, so an
`eval.py --watch` beside training takes the memory training needs. The names, help,
defaults and rule are training's (`--gpu_allow_growth`, `--gpu_memory_fraction`). This
module imports no TensorFlow, so config modules can use it.
"""

from core.errors import require
from core.params import param

__all__ = ['GPU_ALLOW_GROWTH_HELP', 'GPU_MEMORY_FRACTION_HELP', 'gpu_allow_growth_param',
           'gpu_memory_fraction_param', 'check_gpu_options']

GPU_ALLOW_GROWTH_HELP = 'Allocate GPU memory as needed, not all at start.'
GPU_MEMORY_FRACTION_HELP = 'Cap per GPU memory fraction (0 = no cap).'


def gpu_allow_growth_param():
  """The `gpu_allow_growth: bool` field: on by default."""
  return param(True, GPU_ALLOW_GROWTH_HELP)


def gpu_memory_fraction_param():
  """The `gpu_memory_fraction: float` field: 0 = no cap."""
  return param(0.0, GPU_MEMORY_FRACTION_HELP)


def check_gpu_options(config):
  """Raises ConfigError unless config.gpu_memory_fraction is in [0, 1]."""
  require(0.0 <= config.gpu_memory_fraction <= 1.0, '--gpu_memory_fraction=%r must be '
          'in [0, 1] (0 = no cap)' % config.gpu_memory_fraction)
