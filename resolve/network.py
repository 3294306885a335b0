"""The network, built one way for training, evaluation and serving.

Each entry's setup resolves its flags once into a `NetworkSettings` (name, classes, mode,
regularization, batch-norm decay, the net's extra arguments, the compute precision), and
its graph code builds the network from that with `build_network`: the registry's
`network_fn` (`nets.nets_factory`) computing in `mixed_precision` with float32 inputs and
logits (`deployment.precision`). A registry refusal becomes a `ConfigError` naming the flag.
"""

import dataclasses
from typing import Any, Mapping, Optional

from core.params import ConfigError
from deployment.precision import network_in_precision
from nets import nets_factory

__all__ = ['NetworkSettings', 'network_fn', 'build_network']


@dataclasses.dataclass(frozen=True)
class NetworkSettings:
  """Everything that makes the network of a run: `build_network`'s one argument."""
  model_name: str
  num_classes: Optional[int]      # logits; 0 or None: the net's pre-logits features
  is_training: bool = False       # dropout and batch norm in training mode
  weight_decay: Optional[float] = None      # None: the net's default
  batch_norm_decay: Optional[float] = None  # None: the net's arg scope's
  # The net's extra arguments, e.g. depth_multiplier, use_batch_norm, dropout_keep_prob.
  net_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  mixed_precision: str = 'float32'


def network_fn(settings, blame=None):
  """The registry's `network_fn` of `settings`, in float32 (for the kernel checks, which
  apply the precision themselves).

  Raises:
    ConfigError: the registry refuses a setting; the line starts with `blame` (the flags at
      fault; default '--model_name=NAME').
  """
  try:
    return nets_factory.get_network_fn(
        settings.model_name, settings.num_classes, weight_decay=settings.weight_decay,
        is_training=settings.is_training, batch_norm_decay=settings.batch_norm_decay,
        **settings.net_kwargs)
  except ValueError as error:
    raise ConfigError('%s: %s' % (blame or '--model_name=%s' % settings.model_name,
                                  error)) from None


def build_network(settings, blame=None):
  """fn(inputs, ...) -> (float32 logits, end_points): the network of `settings`, computing
  in `settings.mixed_precision` (float32 inputs, logits and variables). Raises as
  `network_fn`."""
  return network_in_precision(network_fn(settings, blame), settings.mixed_precision)
