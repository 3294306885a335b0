"""Optimizers and learning-rate schedules, each a registry keyed by slim's flag values.

Batch semantics: one global step applies the mean gradient of the GLOBAL batch,
    global batch = batch_size (per clone) x num_clones x num_micro_batches
                   x replicas aggregated per step,
where replicas aggregated is replicas_to_aggregate with sync_replicas and 1 otherwise
(asynchronous workers each move the global step), and num_micro_batches the batches each
clone accumulates per step (deployment/accumulation.py). Epoch-based decay and warmup are
converted to steps with that global batch, so adding clones or workers does not stretch
the schedule (slim divided by the per-clone batch: N clones decayed N times too late).
"""

import math

from tf_compat import tf

__all__ = ['OPTIMIZERS', 'LEARNING_RATE_SCHEDULES', 'SCHEDULE_FLAGS', 'global_batch_size',
           'workers_per_update', 'steps_per_epoch', 'decay_steps', 'configure_learning_rate', 'learning_rates_at',
           'configure_optimizer', 'examples_per_worker_step']

# The flags a schedule reads: its own, the step limit (a cosine ends there) and those of
# the global batch (schedules in epochs are converted to steps with it).
SCHEDULE_FLAGS = ('learning_rate_decay_type', 'learning_rate', 'end_learning_rate',
                  'learning_rate_decay_factor', 'num_epochs_per_decay',
                  'learning_rate_boundaries', 'learning_rate_values', 'warmup_epochs',
                  'max_number_of_steps', 'batch_size', 'num_clones', 'num_micro_batches',
                  'sync_replicas', 'replicas_to_aggregate', 'variable_update',
                  'worker_replicas')


def examples_per_worker_step(config):
  """Examples one worker's step runs: per-clone batch x clones x micro-batches."""
  return config.batch_size * config.num_clones * config.num_micro_batches


def workers_per_update(config):
  """Workers whose gradients one global step averages: --replicas_to_aggregate with
  --sync_replicas, every worker when they all-reduce (--variable_update=replicated), else
  1 (asynchronous workers each apply their own)."""
  if config.sync_replicas:
    return config.replicas_to_aggregate
  if getattr(config, 'variable_update', 'parameter_server') == 'replicated':
    return config.worker_replicas
  return 1


def global_batch_size(config):
  """Examples whose mean gradient one global step applies."""
  return examples_per_worker_step(config) * workers_per_update(config)


def steps_per_epoch(config, num_samples):
  return num_samples / float(global_batch_size(config))


def decay_steps(config, num_samples):
  """Global steps between two exponential/polynomial decays (at least 1)."""
  return max(1, int(steps_per_epoch(config, num_samples) * config.num_epochs_per_decay))


def warmup_steps(config, num_samples):
  return int(round(steps_per_epoch(config, num_samples) * config.warmup_epochs))


def _fixed(config, global_step, num_samples):
  del global_step, num_samples
  return tf.constant(config.learning_rate, name='fixed_learning_rate')


def _exponential(config, global_step, num_samples):
  return tf.train.exponential_decay(
      config.learning_rate, global_step, decay_steps(config, num_samples),
      config.learning_rate_decay_factor, staircase=True,
      name='exponential_decay_learning_rate')


def _polynomial(config, global_step, num_samples):
  return tf.train.polynomial_decay(
      config.learning_rate, global_step, decay_steps(config, num_samples),
      config.end_learning_rate, power=1.0, cycle=False,
      name='polynomial_decay_learning_rate')


def _piecewise(config, global_step, num_samples):
  del num_samples
  return tf.train.piecewise_constant(
      global_step, [int(b) for b in config.learning_rate_boundaries],
      [float(v) for v in config.learning_rate_values], name='piecewise_learning_rate')


def _cosine(config, global_step, num_samples):
  """Cosine from learning_rate to end_learning_rate over the steps after warmup."""
  start = warmup_steps(config, num_samples)
  span = max(1, config.max_number_of_steps - start)
  step = tf.maximum(tf.cast(global_step, tf.int64) - start, 0)
  return tf.train.cosine_decay(
      config.learning_rate, step, span, alpha=config.end_learning_rate
      / config.learning_rate, name='cosine_decay_learning_rate')


LEARNING_RATE_SCHEDULES = {
    'fixed': _fixed,
    'exponential': _exponential,
    'polynomial': _polynomial,
    'piecewise': _piecewise,
    'cosine': _cosine,
}


def configure_learning_rate(config, num_samples, global_step):
  """The learning-rate tensor: the schedule, with optional linear warmup from 0.

  Args:
    config: a TrainConfig (checked).
    num_samples: examples in one epoch of the training split.
    global_step: the global step tensor.
  """
  rate = LEARNING_RATE_SCHEDULES[config.learning_rate_decay_type](
      config, global_step, num_samples)
  warmup = warmup_steps(config, num_samples)
  if warmup > 0:
    step = tf.cast(global_step, tf.float32)
    fraction = tf.minimum(1.0, (step + 1.0) / float(warmup))
    rate = tf.multiply(rate, fraction, name='warmup_learning_rate')
  return rate


def learning_rates_at(configs, num_samples, global_step):
  """[float] the learning rate of each config's schedule at `global_step`, from the same
  graph code as training's (a small graph, run on the CPU)."""
  with tf.Graph().as_default():
    step = tf.constant(global_step, tf.int64)
    rates = [configure_learning_rate(config, num_samples, step) for config in configs]
    with tf.Session(config=tf.ConfigProto(device_count={'GPU': 0})) as sess:
      return [float(rate) for rate in sess.run(rates)]


OPTIMIZERS = {
    'adadelta': lambda lr, c: tf.train.AdadeltaOptimizer(
        lr, rho=c.adadelta_rho, epsilon=c.opt_epsilon),
    'adagrad': lambda lr, c: tf.train.AdagradOptimizer(
        lr, initial_accumulator_value=c.adagrad_initial_accumulator_value),
    'adam': lambda lr, c: tf.train.AdamOptimizer(
        lr, beta1=c.adam_beta1, beta2=c.adam_beta2, epsilon=c.opt_epsilon),
    'ftrl': lambda lr, c: tf.train.FtrlOptimizer(
        lr, learning_rate_power=c.ftrl_learning_rate_power,
        initial_accumulator_value=c.ftrl_initial_accumulator_value,
        l1_regularization_strength=c.ftrl_l1, l2_regularization_strength=c.ftrl_l2),
    'momentum': lambda lr, c: tf.train.MomentumOptimizer(
        lr, momentum=c.momentum, name='Momentum'),
    'rmsprop': lambda lr, c: tf.train.RMSPropOptimizer(
        lr, decay=c.rmsprop_decay, momentum=c.rmsprop_momentum, epsilon=c.opt_epsilon),
    'sgd': lambda lr, c: tf.train.GradientDescentOptimizer(lr),
}


def configure_optimizer(config, learning_rate):
  """The `tf.train.Optimizer` named by config.optimizer."""
  return OPTIMIZERS[config.optimizer](learning_rate, config)


def describe_schedule(config, num_samples):
  """One line for the start-up log: the schedule in global steps."""
  parts = ['%s lr=%g' % (config.learning_rate_decay_type, config.learning_rate)]
  if config.learning_rate_decay_type in ('exponential', 'polynomial'):
    parts.append('decay every %d steps' % decay_steps(config, num_samples))
  if config.learning_rate_decay_type == 'piecewise':
    parts.append('boundaries %s values %s' % (list(config.learning_rate_boundaries),
                                              list(config.learning_rate_values)))
  warmup = warmup_steps(config, num_samples)
  if warmup:
    parts.append('warmup %d steps' % warmup)
  return ', '.join(parts)


def is_finite_positive(value):
  return value is not None and math.isfinite(value) and value > 0
