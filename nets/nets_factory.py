"""The network registry: one `NetworkSpec` per name, and slim's `get_network_fn`.

    network_fn = get_network_fn('lenet', num_classes=10, is_training=True)
    logits, end_points = network_fn(images)   # images [N, 28, 28, C]

Unlike slim's factory, `weight_decay=None` means each network's own default
(lenet 0.0, cifarnet 0.004) instead of forcing one training default into every
net: a single value cannot suit nets whose defaults differ by orders of magnitude.

Nothing here is image-specific: inputs go to the net untouched, so video nets with
5-D inputs [N, frames, height, width, channels] register the same way and set
`default_num_frames`.
"""

import dataclasses
import functools
import inspect
import numbers
from typing import Callable, Optional

from tf_compat import slim
from nets import cifarnet
from nets import i3d
from nets import i3d_checkpoints
from nets import lenet
from nets import softmax_regression

# name -> NetworkSpec. Filled by register_network; built-ins at the bottom.
_REGISTRY = {}


def _is_positive_int(value):
  return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
          and value > 0)


def _is_non_negative_real(value):
  return (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and value >= 0)


def _signature_default(fn, parameter):
  """The default of `fn`'s `parameter`, or inspect.Parameter.empty."""
  parameters = inspect.signature(fn).parameters
  if parameter not in parameters:
    return inspect.Parameter.empty
  return parameters[parameter].default


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
  """Everything the pipeline needs to know about one network name.

  Checked once in __init__; read-only afterwards.

  Attributes:
    name: registry key, e.g. 'lenet'.
    net_fn: `net_fn(inputs, num_classes=..., is_training=..., **net_kwargs)`
      returning (logits, end_points).
    arg_scope_fn: `arg_scope_fn(weight_decay=...)` returning an arg scope.
    default_image_size: input height = width the net was designed for.
    default_weight_decay: the net's own decay; must equal arg_scope_fn's
      `weight_decay` default so the two cannot drift apart.
    preprocessing_name: name of the input preprocessing to look up elsewhere.
    default_num_frames: clip length for video nets (5-D inputs); None for images.
    checkpoint_name_map: for nets with foreign checkpoints (i3d: DeepMind's),
      fn(checkpoint names -> shapes, modality=...) -> None when the checkpoint uses our
      variable names, else fn(variable name) -> checkpoint name; raises ValueError for
      a checkpoint of another modality or net. None: names are used as they are.
  """
  name: str
  net_fn: Callable
  arg_scope_fn: Callable
  default_image_size: int
  default_weight_decay: float
  preprocessing_name: str
  default_num_frames: Optional[int] = None
  checkpoint_name_map: Optional[Callable] = None

  def __post_init__(self):
    if not isinstance(self.name, str) or not self.name:
      raise ValueError(f'NetworkSpec name must be a non-empty string, got {self.name!r}')
    for field in ('net_fn', 'arg_scope_fn'):
      if not callable(getattr(self, field)):
        raise ValueError(f'NetworkSpec {self.name!r}: {field} must be callable')
    if not _is_positive_int(self.default_image_size):
      raise ValueError(f'NetworkSpec {self.name!r}: default_image_size must be a '
                       f'positive int, got {self.default_image_size!r}')
    if not _is_non_negative_real(self.default_weight_decay):
      raise ValueError(f'NetworkSpec {self.name!r}: default_weight_decay must be a '
                       f'number >= 0, got {self.default_weight_decay!r}')
    if not isinstance(self.preprocessing_name, str) or not self.preprocessing_name:
      raise ValueError(f'NetworkSpec {self.name!r}: preprocessing_name must be a '
                       f'non-empty string, got {self.preprocessing_name!r}')
    if self.checkpoint_name_map is not None and not callable(self.checkpoint_name_map):
      raise ValueError(f'NetworkSpec {self.name!r}: checkpoint_name_map must be None or '
                       'callable')
    if self.default_num_frames is not None and not _is_positive_int(
        self.default_num_frames):
      raise ValueError(f'NetworkSpec {self.name!r}: default_num_frames must be None '
                       f'or a positive int, got {self.default_num_frames!r}')
    self._check_agrees_with_functions()

  def _check_agrees_with_functions(self):
    """Refuses a spec whose defaults contradict the functions it names."""
    scope_default = _signature_default(self.arg_scope_fn, 'weight_decay')
    if scope_default is inspect.Parameter.empty:
      raise ValueError(f'NetworkSpec {self.name!r}: arg_scope_fn must take a '
                       'weight_decay argument with a default')
    if scope_default != self.default_weight_decay:
      raise ValueError(f'NetworkSpec {self.name!r}: default_weight_decay='
                       f'{self.default_weight_decay!r} but arg_scope_fn defaults to '
                       f'{scope_default!r}')
    net_size = getattr(self.net_fn, 'default_image_size', self.default_image_size)
    if net_size != self.default_image_size:
      raise ValueError(f'NetworkSpec {self.name!r}: default_image_size='
                       f'{self.default_image_size} but net_fn.default_image_size='
                       f'{net_size}')


def register_network(spec):
  """Adds `spec` under `spec.name` and returns it.

  Raises:
    TypeError: `spec` is not a NetworkSpec.
    ValueError: the name is already registered.
  """
  if not isinstance(spec, NetworkSpec):
    raise TypeError(f'register_network takes a NetworkSpec, got {type(spec).__name__}')
  if spec.name in _REGISTRY:
    raise ValueError(f'network {spec.name!r} is already registered; registered: '
                     f'{", ".join(list_networks())}')
  _REGISTRY[spec.name] = spec
  return spec


def list_networks():
  """Sorted names of every registered network."""
  return sorted(_REGISTRY)


def get_network_spec(name):
  """The NetworkSpec registered as `name`.

  Raises:
    ValueError: unknown name; the message lists the valid names.
  """
  try:
    return _REGISTRY[name]
  except (KeyError, TypeError):
    raise ValueError(f'unknown network {name!r}; valid names: '
                     f'{", ".join(list_networks())}') from None


def _check_net_kwargs(spec, net_kwargs):
  """Fails now, not at graph-building time, on arguments the net does not take."""
  parameters = inspect.signature(spec.net_fn).parameters
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
    return
  # The first parameter is the input tensor; the factory owns these two.
  accepted = [p for p in list(parameters)[1:] if p not in ('num_classes', 'is_training')]
  unknown = sorted(set(net_kwargs) - set(accepted))
  if unknown:
    raise ValueError(f'network {spec.name!r} does not take {", ".join(unknown)}; '
                     f'it takes: {", ".join(accepted)}')


def _resolve_weight_decay(spec, weight_decay):
  """None -> the net's own default; otherwise a float >= 0 (slim rejects ints)."""
  if weight_decay is None:
    return float(spec.default_weight_decay)
  if not _is_non_negative_real(weight_decay):
    raise ValueError(f'weight_decay must be None or a number >= 0, got {weight_decay!r}')
  return float(weight_decay)


def _check_num_classes(num_classes):
  """None, 0 (the pre-logits features) or a positive int."""
  if num_classes is not None and not (
      isinstance(num_classes, numbers.Integral) and not isinstance(num_classes, bool)
      and num_classes >= 0):
    raise ValueError(f'num_classes must be None or an int >= 0, got {num_classes!r}')


def _scope_kwargs(spec, weight_decay, batch_norm_decay):
  """The arguments of the net's arg scope: the resolved weight decay, and the batch norm
  decay when one is given (refused for a net whose arg scope has none)."""
  scope_kwargs = {'weight_decay': weight_decay}
  if batch_norm_decay is not None:
    if _signature_default(spec.arg_scope_fn, 'batch_norm_decay') is inspect.Parameter.empty:
      raise ValueError(f'network {spec.name!r} has no batch_norm_decay in its arg scope')
    if not (isinstance(batch_norm_decay, numbers.Real) and 0 < batch_norm_decay < 1):
      raise ValueError(f'batch_norm_decay must be in (0, 1), got {batch_norm_decay!r}')
    scope_kwargs['batch_norm_decay'] = float(batch_norm_decay)
  return scope_kwargs


def get_network_fn(name, num_classes, weight_decay=None, is_training=False,
                   batch_norm_decay=None, **net_kwargs):
  """Returns `network_fn(inputs, **kwargs) -> (logits, end_points)` for `name`.

  Args:
    name: a registered network name (see list_networks()).
    num_classes: number of logits; 0 or None asks the net for its pre-logits
      features instead.
    weight_decay: L2 scale for the net's arg scope; None uses the net's own
      default (`spec.default_weight_decay`).
    is_training: passed to the net (dropout, batch norm mode).
    batch_norm_decay: moving-average decay of the net's batch norm, passed to its arg
      scope; None keeps the net's own. Short runs want a lower decay than the 0.999 or
      0.9997 of long ImageNet schedules, or the moving statistics never catch up.
    **net_kwargs: extra net arguments, e.g. `use_batch_norm=True`,
      `dropout_keep_prob=0.8`; checked against the net's signature here.
      Keyword arguments given to `network_fn` itself override them.

  Returns:
    network_fn. Its inputs are whatever the net takes, e.g. images
    [batch, size, size, channels] or clips [batch, frames, size, size, channels].
    It carries `.default_image_size`, `.spec` and `.weight_decay` (the value
    actually applied).

  Raises:
    ValueError: unknown name, bad num_classes or weight_decay, or a net_kwarg
      the net does not take.
  """
  spec = get_network_spec(name)
  _check_num_classes(num_classes)
  weight_decay = _resolve_weight_decay(spec, weight_decay)
  _check_net_kwargs(spec, net_kwargs)
  scope_kwargs = _scope_kwargs(spec, weight_decay, batch_norm_decay)

  @functools.wraps(spec.net_fn)
  def network_fn(inputs, **kwargs):
    with slim.arg_scope(spec.arg_scope_fn(**scope_kwargs)):
      return spec.net_fn(inputs, num_classes=num_classes, is_training=is_training,
                         **{**net_kwargs, **kwargs})

  network_fn.default_image_size = spec.default_image_size
  network_fn.spec = spec
  network_fn.weight_decay = weight_decay
  return network_fn


# The built-in networks, one entry each.
_BUILTIN_NETWORKS = (
    NetworkSpec(name='cifarnet',
                net_fn=cifarnet.cifarnet,
                arg_scope_fn=cifarnet.cifarnet_arg_scope,
                default_image_size=32,
                default_weight_decay=0.004,
                preprocessing_name='cifarnet'),
    NetworkSpec(name='i3d',
                net_fn=i3d.i3d,
                arg_scope_fn=i3d.i3d_arg_scope,
                default_image_size=224,
                default_weight_decay=1e-7,
                preprocessing_name='i3d',
                default_num_frames=64,
                checkpoint_name_map=i3d_checkpoints.name_map_for_checkpoint),
    NetworkSpec(name='lenet',
                net_fn=lenet.lenet,
                arg_scope_fn=lenet.lenet_arg_scope,
                default_image_size=28,
                default_weight_decay=0.0,
                preprocessing_name='lenet'),
    NetworkSpec(name='softmax_regression',
                net_fn=softmax_regression.softmax_regression,
                arg_scope_fn=softmax_regression.softmax_regression_arg_scope,
                default_image_size=28,
                default_weight_decay=0.0,
                preprocessing_name='lenet'),
)

for _spec in _BUILTIN_NETWORKS:
  register_network(_spec)
del _spec
