"""The rules of a TrainConfig's optimizer and learning-rate schedule (training.setup runs
them before any graph): the names in training.optimization's OPTIMIZERS and
LEARNING_RATE_SCHEDULES, and each one's hyper-parameters where tf.train would reject them
deep inside graph building. Each fails with one line naming the flag (core.errors.require).
"""

from core.errors import require
from training import optimization

__all__ = ['check_optimizer', 'check_learning_rate']


def check_optimizer(config):
  """--optimizer, its hyper-parameters, weight decay, moving average and clipping."""
  names = sorted(optimization.OPTIMIZERS)
  require(config.optimizer in optimization.OPTIMIZERS,
           '--optimizer=%s is not known; valid: %s' % (config.optimizer, ', '.join(names)))
  for name in ('learning_rate', 'opt_epsilon'):
    value = getattr(config, name)
    require(optimization.is_finite_positive(value), '--%s=%r must be > 0' % (name, value))
  for name in ('momentum', 'rmsprop_momentum', 'rmsprop_decay', 'adam_beta1', 'adam_beta2',
               'adadelta_rho', 'label_smoothing'):
    value = getattr(config, name)
    require(0.0 <= value < 1.0, '--%s=%r must be in [0, 1)' % (name, value))
  _check_specifics(config)
  if config.weight_decay is not None:
    require(config.weight_decay >= 0, '--weight_decay=%r must be >= 0 (or unset for the '
             'network default)' % config.weight_decay)
  if config.moving_average_decay is not None:
    require(0.0 < config.moving_average_decay < 1.0, '--moving_average_decay=%r must be '
             'in (0, 1), e.g. 0.9999' % config.moving_average_decay)
  require(config.clip_gradient_norm >= 0, '--clip_gradient_norm=%r must be >= 0 (0 = off)'
           % config.clip_gradient_norm)


def _check_specifics(config):
  """Hyper-parameters tf.train optimizers would reject deep inside graph building."""
  require(config.adagrad_initial_accumulator_value > 0,
           '--adagrad_initial_accumulator_value=%r must be > 0'
           % config.adagrad_initial_accumulator_value)
  require(config.ftrl_learning_rate_power <= 0, '--ftrl_learning_rate_power=%r must be '
           '<= 0 (e.g. -0.5)' % config.ftrl_learning_rate_power)
  for name in ('ftrl_initial_accumulator_value', 'ftrl_l1', 'ftrl_l2'):
    value = getattr(config, name)
    require(value >= 0, '--%s=%r must be >= 0' % (name, value))


def check_learning_rate(config):
  """--learning_rate_decay_type and the flags of that schedule."""
  kind = config.learning_rate_decay_type
  names = sorted(optimization.LEARNING_RATE_SCHEDULES)
  require(kind in optimization.LEARNING_RATE_SCHEDULES,
           '--learning_rate_decay_type=%s is not known; valid: %s' % (kind, ', '.join(names)))
  require(config.warmup_epochs >= 0, '--warmup_epochs=%r must be >= 0' % config.warmup_epochs)
  if kind in ('exponential', 'polynomial'):
    require(config.num_epochs_per_decay > 0, '--num_epochs_per_decay=%r must be > 0'
             % config.num_epochs_per_decay)
  if kind == 'exponential':
    require(0 < config.learning_rate_decay_factor <= 1, '--learning_rate_decay_factor=%r '
             'must be in (0, 1]' % config.learning_rate_decay_factor)
  if kind in ('polynomial', 'cosine'):
    require(0 <= config.end_learning_rate <= config.learning_rate,
             '--end_learning_rate=%r must be in [0, --learning_rate=%r]'
             % (config.end_learning_rate, config.learning_rate))
  if kind == 'cosine':
    require(config.max_number_of_steps is not None or config.max_number_of_epochs,
             '--learning_rate_decay_type=cosine needs --max_number_of_steps or '
             '--max_number_of_epochs (the schedule ends there)')
  if kind == 'piecewise':
    _check_piecewise(config.learning_rate_boundaries, config.learning_rate_values)


def _check_piecewise(boundaries, values):
  require(len(values) == len(boundaries) + 1,
           '--learning_rate_values needs one more value than --learning_rate_boundaries '
           '(got %d values for %d boundaries)' % (len(values), len(boundaries)))
  require(all(b > 0 for b in boundaries) and list(boundaries) == sorted(set(boundaries)),
           '--learning_rate_boundaries=%s must be increasing positive global steps'
           % ','.join(str(b) for b in boundaries))
  require(all(v > 0 for v in values), '--learning_rate_values=%s must all be > 0'
           % ','.join(str(v) for v in values))
