"""Dynamic loss scaling for float16 training: scale the loss, unscale the gradients, skip
an update whose gradients are not finite.

float16's smallest normal number is 6e-5: small gradients of a half-precision network
flush to zero. Multiplying the loss by a scale S multiplies every gradient by S, so they
stay representable; the gradients are divided by S (in float32) before the update. Too
large an S overflows to inf or nan instead: that step must not touch the weights. The
scale follows TensorFlow's dynamic loss scale (tf_cnn_benchmarks' automatic loss scale):

  * it starts at --loss_scale (2**15);
  * a step whose gradients are not all finite is skipped (no weight or optimizer slot
    changes; the global step still advances, so schedules and --max_number_of_steps count
    it; what is not part of the update still runs: batch norm's moving statistics follow
    the step's forward pass, and --moving_average_decay's averages take their step
    towards the unchanged weights) and the scale halves (never below 1);
  * after --loss_scale_growth_steps finite steps in a row (2000) the scale doubles.

Two wrappers, so that synchronous replicas stay consistent:

    update = SkipNonFiniteUpdates(optimizer, scale)        # applies only finite gradients
    update = SyncReplicasOptimizer(update, ...)            # optional
    optimizer = LossScaleOptimizer(update, scale)          # scales, unscales, adapts S

`LossScaleOptimizer` runs on each worker: it scales each clone's loss by the worker's
scale, returns float32 gradients divided by it, and after the clones' gradients are summed
checks them and halves or grows the worker's scale. `SkipNonFiniteUpdates` runs where the
update is applied: on the worker itself without sync replicas, on the chief's update
with them. There it checks the aggregated gradient: one worker's overflow makes the mean
not finite, so the whole update is skipped, never applied with the other workers' share
alone (that would be a smaller batch than the update promises). Every worker still sends
its gradient, so the accumulators take one per worker and no one waits for a gradient
that never comes; the global step advances and the tokens go out as after any update.
Each worker keeps its own scale: a worker that overflowed halves its own; the others,
whose gradients were finite, keep theirs (their update was skipped for another's
overflow, which does not say their scale is too high).

State: `DynamicLossScale` holds local variables of the worker (never in a checkpoint, so
a float16 run's checkpoint has exactly a float32 run's names and restores into either; a
resumed run starts again from --loss_scale and finds its level within a few skipped
steps). `skipped_steps` counts the updates this process skipped (on the chief of a
synchronous job, every skipped update); `overflow_steps` the steps whose gradients this
worker found not finite.
"""

from deployment.wrapped_optimizer import WrappedOptimizer
from tf_compat import tf

__all__ = ['DynamicLossScale', 'LossScaleOptimizer', 'SkipNonFiniteUpdates', 'all_finite']


def _local_variable(name, initial_value, dtype):
  return tf.Variable(initial_value, dtype=dtype, trainable=False, name=name,
                     collections=[tf.GraphKeys.LOCAL_VARIABLES])


class DynamicLossScale:
  """The scale and its counters: local variables on the current device (module doc).

  Attributes:
    scale: float32 variable, the current loss scale.
    good_steps: int64, finite steps in a row since the last change of the scale.
    overflow_steps: int64, steps whose gradients this worker found not finite.
    skipped_steps: int64, updates this process skipped (SkipNonFiniteUpdates).
  """

  def __init__(self, initial_scale=2.0 ** 15, growth_steps=2000, name='loss_scale'):
    if not initial_scale >= 1.0:
      raise ValueError('initial_scale=%r must be >= 1' % initial_scale)
    if growth_steps < 0:
      raise ValueError('growth_steps=%r must be >= 0 (0 = never grow)' % growth_steps)
    self.growth_steps = int(growth_steps)
    with tf.name_scope(name + '/'):
      self.scale = _local_variable('scale', float(initial_scale), tf.float32)
      self.good_steps = _local_variable('good_steps', 0, tf.int64)
      self.overflow_steps = _local_variable('overflow_steps', 0, tf.int64)
      self.skipped_steps = _local_variable('skipped_steps', 0, tf.int64)

  def update(self, finite):
    """The op that adapts the scale to one step whose gradients were `finite` (a bool
    scalar): halve (at least 1) on overflow, double after growth_steps finite steps."""
    with tf.name_scope('update_loss_scale'):
      scale = self.scale.read_value()
      good = tf.where(finite, self.good_steps.read_value() + 1, tf.constant(0, tf.int64))
      grow = tf.constant(False)
      if self.growth_steps:
        doubled = scale * 2.0
        grow = tf.logical_and(tf.logical_and(finite, good >= self.growth_steps),
                              tf.math.is_finite(doubled))
      new_scale = tf.where(finite, tf.where(grow, scale * 2.0, scale),
                           tf.maximum(scale / 2.0, 1.0))
      return tf.group(
          self.scale.assign(new_scale, read_value=False),
          self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), good),
                                 read_value=False),
          self.overflow_steps.assign_add(tf.cast(tf.logical_not(finite), tf.int64),
                                         read_value=False))


def all_finite(gradients):
  """A bool scalar: every entry of every gradient (dense or IndexedSlices) is finite."""
  checks = []
  for grad in gradients:
    if grad is None:
      continue
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    checks.append(tf.reduce_all(tf.math.is_finite(values)))
  return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


def _unscale(grad, inverse):
  if grad is None:
    return None
  if isinstance(grad, tf.IndexedSlices):
    return tf.IndexedSlices(grad.values * tf.cast(inverse, grad.values.dtype),
                            grad.indices, grad.dense_shape)
  return grad * tf.cast(inverse, grad.dtype)


class _Wrapper(WrappedOptimizer):
  """A wrapper that also carries the loss scale."""

  def __init__(self, opt, loss_scale, name):
    super().__init__(opt, name)
    self._loss_scale = loss_scale

  @property
  def loss_scale(self):
    """The DynamicLossScale."""
    return self._loss_scale


class LossScaleOptimizer(_Wrapper):
  """Scales the loss, unscales the gradients, adapts the worker's scale (module doc)."""

  def __init__(self, opt, loss_scale, name='LossScale'):
    super().__init__(opt, loss_scale, name)

  def compute_gradients(self, loss, *args, **kwargs):
    """The wrapped optimizer's (gradient, variable) pairs of `loss`, computed on `loss`
    times the scale and divided by it in the gradients' own dtype (float32 for the
    float32 variables of deployment.precision)."""
    scale = self._loss_scale.scale.read_value()  # One read: scaled and unscaled alike.
    scaled = tf.multiply(loss, tf.cast(scale, loss.dtype), name='scaled_loss')
    inverse = tf.math.reciprocal(scale)
    return [(_unscale(grad, inverse), var)
            for grad, var in self._opt.compute_gradients(scaled, *args, **kwargs)]

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """The wrapped optimizer's apply (or send) of the gradients, grouped with the update
    of the scale from their finiteness."""
    grads_and_vars = list(grads_and_vars)
    update_scale = self._loss_scale.update(all_finite([g for g, _ in grads_and_vars]))
    apply = self._opt.apply_gradients(grads_and_vars, global_step=global_step, name=name)
    return tf.group(apply, update_scale, name='apply_and_update_loss_scale')


class SkipNonFiniteUpdates(_Wrapper):
  """Applies the gradients only when all are finite; otherwise advances the global step
  and counts the skip in loss_scale.skipped_steps (module doc)."""

  def __init__(self, opt, loss_scale, name='SkipNonFinite'):
    super().__init__(opt, loss_scale, name)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    grads_and_vars = list(grads_and_vars)
    finite = all_finite([g for g, _ in grads_and_vars])

    def apply():
      # Slots are created here too: variables lift their initializers out of the cond.
      with tf.control_dependencies([self._opt.apply_gradients(
          grads_and_vars, global_step=global_step, name=name)]):
        return tf.constant(True)

    def skip():
      ops = [self._loss_scale.skipped_steps.assign_add(1, read_value=False)]
      if global_step is not None:
        ops.append(tf.assign_add(global_step, tf.ones([], global_step.dtype.base_dtype)))
      with tf.control_dependencies(ops):
        return tf.constant(False)
    return tf.cond(finite, apply, skip, name='apply_if_finite')
