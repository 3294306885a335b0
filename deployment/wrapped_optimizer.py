"""One base for the optimizers that wrap another (synchronous replicas, float16 loss
scaling, XLA-compiled gradients): the wrapped optimizer computes and applies gradients and
owns the slots and variables, unless the subclass overrides a method to add its part."""

from tf_compat import tf

__all__ = ['WrappedOptimizer']


class WrappedOptimizer(tf.train.Optimizer):
  """Delegates gradients, slots and variables to `opt`; subclasses override what they
  change."""

  def __init__(self, opt, name):
    super().__init__(use_locking=False, name=name)
    self._opt = opt

  @property
  def wrapped(self):
    """The optimizer inside."""
    return self._opt

  def compute_gradients(self, *args, **kwargs):
    return self._opt.compute_gradients(*args, **kwargs)

  def apply_gradients(self, *args, **kwargs):
    return self._opt.apply_gradients(*args, **kwargs)

  def get_slot(self, *args, **kwargs):
    return self._opt.get_slot(*args, **kwargs)

  def get_slot_names(self, *args, **kwargs):
    return self._opt.get_slot_names(*args, **kwargs)

  def variables(self):
    return self._opt.variables()
