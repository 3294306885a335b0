"""deployment/session/gpu_options.py: the GPU memory flags every session-creating entry declares,
with training's names, help, defaults and rule."""

import dataclasses
import math

import pytest

from core.params import ConfigError, param
from deployment.session import gpu_options, session_config
from evaluation.config import EvalConfig
from serving.export_model import ExportConfig
from serving.predict_video import PredictConfig
from training.config import TrainConfig

# nets.inflate is not among them: its session makes no GPU device (nets/inflation.py).
ENTRY_CONFIGS = [TrainConfig, EvalConfig, ExportConfig, PredictConfig]


@dataclasses.dataclass(frozen=True)
class _Config:
  name: str = param('x', 'A field before.')
  # GPU memory.
  gpu_allow_growth: bool = gpu_options.gpu_allow_growth_param()
  gpu_memory_fraction: float = gpu_options.gpu_memory_fraction_param()


def _fields(config_class):
  return {field.name: field for field in dataclasses.fields(config_class)}


@pytest.mark.parametrize('config_class', ENTRY_CONFIGS, ids=lambda c: c.__name__)
def test_every_entry_declares_them_as_training_does(config_class):
  """Same default and help in every entry (training's are the model: its fields predate
  the shared ones)."""
  fields, shared = _fields(config_class), _fields(_Config)
  for name in ('gpu_allow_growth', 'gpu_memory_fraction'):
    assert fields[name].default == shared[name].default, (config_class, name)
    assert fields[name].metadata['help'] == shared[name].metadata['help'], (config_class,
                                                                             name)
    assert fields[name].type == shared[name].type


def test_defaults_grow_and_do_not_cap():
  config = _Config()
  assert (config.gpu_allow_growth, config.gpu_memory_fraction) == (True, 0.0)
  gpu_options.check_gpu_options(config)


@pytest.mark.parametrize('fraction', [0.0, 0.25, 1.0])
def test_fractions_in_range_pass(fraction):
  gpu_options.check_gpu_options(_Config(gpu_memory_fraction=fraction))


@pytest.mark.parametrize('fraction', [-0.1, 1.5, float('nan')])
def test_fraction_out_of_range_is_one_line_naming_the_flag(fraction):
  with pytest.raises(ConfigError) as error:
    gpu_options.check_gpu_options(_Config(gpu_memory_fraction=fraction))
  assert str(error.value) == '--gpu_memory_fraction=%r must be in [0, 1] (0 = no cap)' % (
      fraction,)


@pytest.mark.parametrize('growth,fraction', [(True, 0.0), (False, 0.4)])
def test_session_config_for_carries_them(growth, fraction):
  proto = session_config.session_config_for(
      _Config(gpu_allow_growth=growth, gpu_memory_fraction=fraction))
  assert proto.gpu_options.allow_growth is growth
  assert math.isclose(proto.gpu_options.per_process_gpu_memory_fraction, fraction,
                      rel_tol=1e-6)
  assert dict(proto.device_count) == {'CPU': 1}
