"""Tests for training/optimization.py: optimizers and learning-rate schedules.

Optimizers take a few steps on a one-variable quadratic and are compared with the TF 1
update rules written out in NumPy; schedules are evaluated in a session at chosen global
steps and compared with their closed forms. Batch arithmetic is done by hand on the
digits train split (1437 examples).
"""

import dataclasses
import math

import numpy as np
import pytest

from tf_compat import tf
from training import optimization
from training.config import TrainConfig

NUM_SAMPLES = 1437  # digits train split

# --------------------------------------------------------------------------------------
# Global batch and the step arithmetic derived from it


@pytest.mark.parametrize('changes, global_batch', [
    (dict(), 32),
    (dict(num_clones=2), 64),
    (dict(batch_size=10, num_clones=3), 30),
    (dict(num_clones=2, replicas_to_aggregate=3, sync_replicas=True), 192),
    (dict(num_clones=2, replicas_to_aggregate=3, sync_replicas=False), 64),  # async
    (dict(batch_size=3, num_micro_batches=2), 6),
    (dict(num_clones=2, num_micro_batches=3, replicas_to_aggregate=2, sync_replicas=True),
     384),
])
def test_global_batch_size(changes, global_batch):
  config = TrainConfig(**changes)
  assert optimization.global_batch_size(config) == global_batch
  assert optimization.steps_per_epoch(config, NUM_SAMPLES) == pytest.approx(
      NUM_SAMPLES / global_batch)


@pytest.mark.parametrize('changes, steps', [
    (dict(num_clones=1), 89),                          # int(1437 / 32 * 2) = int(89.81)
    (dict(num_clones=2), 44),                          # int(1437 / 64 * 2) = int(44.91)
    (dict(num_clones=2, replicas_to_aggregate=3, sync_replicas=True), 14),  # int(14.97)
    (dict(num_clones=2, num_epochs_per_decay=0.5), 11),  # int(11.23)
    (dict(batch_size=2000, num_epochs_per_decay=0.5), 1),  # int(0.36) -> at least 1
    (dict(batch_size=16, num_micro_batches=2), 89),      # global batch 32, as 1 x 32
    (dict(num_micro_batches=4), 22),                   # int(1437 / 128 * 2) = int(22.45)
])
def test_decay_steps_use_the_global_batch(changes, steps):
  assert optimization.decay_steps(TrainConfig(**changes), NUM_SAMPLES) == steps


def test_describe_schedule_reports_global_steps():
  config = TrainConfig(num_clones=2, warmup_epochs=2.0)
  line = optimization.describe_schedule(config, NUM_SAMPLES)
  assert 'decay every 44 steps' in line
  assert 'warmup 45 steps' in line


# --------------------------------------------------------------------------------------
# Learning-rate schedules


def rates_at(config, steps, num_samples=NUM_SAMPLES):
  """The learning rate at each global step, from a fresh graph and session."""
  with tf.Graph().as_default():
    global_step = tf.placeholder(tf.int64, [])
    rate = optimization.configure_learning_rate(config, num_samples, global_step)
    assert rate.dtype == tf.float32
    with tf.Session() as sess:
      return np.array([sess.run(rate, {global_step: s}) for s in steps], np.float64)


def assert_rates(config, expected_by_step):
  steps = sorted(expected_by_step)
  np.testing.assert_allclose(rates_at(config, steps),
                             [expected_by_step[s] for s in steps], rtol=1e-5, atol=1e-9)


def test_registry_names():
  assert sorted(optimization.LEARNING_RATE_SCHEDULES) == [
      'cosine', 'exponential', 'fixed', 'piecewise', 'polynomial']


def test_fixed():
  config = TrainConfig(learning_rate_decay_type='fixed', learning_rate=0.05)
  assert_rates(config, {s: 0.05 for s in (0, 1, 100, 10**6)})


@pytest.mark.parametrize('num_clones, decay', [(2, 44), (1, 89)])
def test_exponential_staircase_decays_every_global_batch_epochs(num_clones, decay):
  config = TrainConfig(learning_rate_decay_type='exponential', learning_rate=0.1,
                       learning_rate_decay_factor=0.5, num_epochs_per_decay=2.0,
                       batch_size=32, num_clones=num_clones)
  steps = [0, 1, decay - 1, decay, decay + 1, 2 * decay - 1, 2 * decay, 5 * decay + 3]
  assert_rates(config, {s: 0.1 * 0.5 ** (s // decay) for s in steps})


def test_exponential_with_sync_replicas_counts_aggregated_batches():
  config = TrainConfig(learning_rate=0.1, learning_rate_decay_factor=0.5,
                       num_clones=2, replicas_to_aggregate=3, sync_replicas=True)
  # global batch 32 * 2 * 3 = 192; decay every int(1437 / 192 * 2) = 14 steps.
  assert_rates(config, {0: 0.1, 13: 0.1, 14: 0.05, 27: 0.05, 28: 0.025, 42: 0.0125})


def test_exponential_default_factor():
  config = TrainConfig(num_clones=2)  # learning_rate 0.01, factor 0.94
  assert_rates(config, {0: 0.01, 44: 0.01 * 0.94, 100: 0.01 * 0.94 ** 2})


def test_polynomial_reaches_end_learning_rate_after_decay_steps():
  config = TrainConfig(learning_rate_decay_type='polynomial', learning_rate=0.1,
                       end_learning_rate=0.001, num_epochs_per_decay=2.0, num_clones=2)
  decay = 44
  expected = {s: (0.1 - 0.001) * (1 - min(s, decay) / decay) + 0.001
              for s in (0, 1, 11, 22, 43, 44, 45, 1000)}
  assert_rates(config, expected)
  assert expected[22] == pytest.approx(0.0505)


def test_piecewise():
  config = TrainConfig(learning_rate_decay_type='piecewise',
                       learning_rate_boundaries=(100, 200),
                       learning_rate_values=(0.1, 0.01, 0.001))
  # values[i] while boundaries[i-1] < step <= boundaries[i].
  assert_rates(config, {0: 0.1, 99: 0.1, 100: 0.1, 101: 0.01, 199: 0.01, 200: 0.01,
                        201: 0.001, 10**6: 0.001})


def test_piecewise_single_boundary():
  config = TrainConfig(learning_rate_decay_type='piecewise',
                       learning_rate_boundaries=(5,), learning_rate_values=(1.0, 0.5))
  assert_rates(config, {0: 1.0, 5: 1.0, 6: 0.5})


def cosine(step, lr, end, span):
  step = min(max(step, 0), span)
  return end + (lr - end) * 0.5 * (1 + math.cos(math.pi * step / span))


def test_cosine_ends_at_end_learning_rate_at_max_number_of_steps():
  config = TrainConfig(learning_rate_decay_type='cosine', learning_rate=0.02,
                       end_learning_rate=0.0001, max_number_of_steps=600)
  steps = (0, 1, 150, 300, 450, 599, 600, 601, 2000)
  expected = {s: cosine(s, 0.02, 0.0001, 600) for s in steps}
  assert expected[300] == pytest.approx((0.02 + 0.0001) / 2)
  assert_rates(config, expected)
  assert rates_at(config, [600])[0] == pytest.approx(0.0001, rel=1e-5)


def test_cosine_with_warmup_like_the_demo_recipe():
  # configs/digits_lenet_2xcpu.cfg: 2 clones x 32, 1 warmup epoch, 600 steps.
  config = TrainConfig(learning_rate_decay_type='cosine', learning_rate=0.02,
                       end_learning_rate=0.0001, max_number_of_steps=600,
                       warmup_epochs=1.0, num_clones=2)
  warmup = 22  # round(1437 / 64) = round(22.45)
  span = 600 - warmup  # the cosine runs over the steps after warmup
  steps = (0, 1, 10, 21, 22, 23, 100, 311, 599, 600, 700)
  expected = {s: cosine(s - warmup, 0.02, 0.0001, span) * min(1.0, (s + 1) / warmup)
              for s in steps}
  assert expected[0] == pytest.approx(0.02 / 22)
  assert expected[21] == pytest.approx(0.02)
  assert expected[600] == pytest.approx(0.0001)
  assert_rates(config, expected)


def test_cosine_with_the_global_step_variable():
  config = TrainConfig(learning_rate_decay_type='cosine', learning_rate=0.02,
                       end_learning_rate=0.0001, max_number_of_steps=600,
                       warmup_epochs=1.0, num_clones=2)
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    rate = optimization.configure_learning_rate(config, NUM_SAMPLES, global_step)
    new_step = tf.placeholder(tf.int64, [])
    assign = tf.assign(global_step, new_step)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      got = []
      for step in (0, 300, 600):
        sess.run(assign, {new_step: step})
        got.append(sess.run(rate))
  np.testing.assert_allclose(
      got, [0.02 / 22, cosine(300 - 22, 0.02, 0.0001, 578), 0.0001], rtol=1e-5)


def test_linear_warmup_on_fixed_rounds_warmup_steps():
  # steps per epoch 1437 / 64 = 22.45; 2 epochs = 44.9 -> 45 warmup steps (not 44).
  config = TrainConfig(learning_rate_decay_type='fixed', learning_rate=0.1,
                       warmup_epochs=2.0, num_clones=2)
  steps = (0, 1, 22, 43, 44, 45, 100)
  assert_rates(config, {s: 0.1 * min(1.0, (s + 1) / 45) for s in steps})


def test_linear_warmup_on_exponential():
  config = TrainConfig(learning_rate_decay_type='exponential', learning_rate=0.1,
                       learning_rate_decay_factor=0.5, warmup_epochs=0.5, num_clones=1)
  warmup = 22  # round(1437 / 32 * 0.5) = round(22.45)
  decay = 89
  steps = (0, 10, 21, 22, 88, 89, 200)
  assert_rates(config, {s: 0.1 * 0.5 ** (s // decay) * min(1.0, (s + 1) / warmup)
                        for s in steps})


def test_warmup_uses_the_global_batch_with_sync_replicas():
  config = TrainConfig(learning_rate_decay_type='fixed', learning_rate=0.3,
                       warmup_epochs=1.0, num_clones=2, replicas_to_aggregate=3,
                       sync_replicas=True)
  warmup = 7  # round(1437 / 192) = round(7.48)
  assert_rates(config, {s: 0.3 * min(1.0, (s + 1) / warmup) for s in (0, 3, 6, 7, 50)})


# --------------------------------------------------------------------------------------
# Optimizers

EXPECTED_CLASSES = {
    'adadelta': 'AdadeltaOptimizer',
    'adagrad': 'AdagradOptimizer',
    'adam': 'AdamOptimizer',
    'ftrl': 'FtrlOptimizer',
    'momentum': 'MomentumOptimizer',
    'rmsprop': 'RMSPropOptimizer',
    'sgd': 'GradientDescentOptimizer',
}

# Non-default, pairwise distinct hyper-parameters, so a crossed wire shows.
HYPER = dict(adadelta_rho=0.85, adagrad_initial_accumulator_value=0.3, adam_beta1=0.8,
             adam_beta2=0.99, opt_epsilon=0.1, ftrl_learning_rate_power=-0.7,
             ftrl_initial_accumulator_value=0.2, ftrl_l1=0.01, ftrl_l2=0.02,
             momentum=0.7, rmsprop_momentum=0.5, rmsprop_decay=0.6)


def test_optimizer_registry_names():
  assert sorted(optimization.OPTIMIZERS) == sorted(EXPECTED_CLASSES)


@pytest.mark.parametrize('name', sorted(EXPECTED_CLASSES))
def test_optimizer_class(name):
  with tf.Graph().as_default():
    optimizer = optimization.configure_optimizer(TrainConfig(optimizer=name, **HYPER), 0.1)
  expected = getattr(tf.train, EXPECTED_CLASSES[name])
  assert type(optimizer) is expected


def test_ftrl_hyper_parameters():
  with tf.Graph().as_default():
    optimizer = optimization.configure_optimizer(TrainConfig(optimizer='ftrl', **HYPER),
                                                 0.1)
  # pylint: disable=protected-access
  assert optimizer._learning_rate == 0.1
  assert optimizer._learning_rate_power == -0.7
  assert optimizer._initial_accumulator_value == 0.2
  assert optimizer._l1_regularization_strength == 0.01
  assert optimizer._l2_regularization_strength == 0.02


def test_learning_rate_tensor_is_used():
  with tf.Graph().as_default():
    rate = tf.constant(0.25)
    optimizer = optimization.configure_optimizer(TrainConfig(optimizer='sgd'), rate)
    assert optimizer._learning_rate is rate  # pylint: disable=protected-access


# f(x) = A / 2 * (x - C)^2, gradient A * (x - C).
A, C, X0, LR, STEPS = 3.0, 0.5, 2.0, 0.1, 4


def grad(x):
  return A * (x - C)


def numpy_sgd(h):
  del h
  x = X0
  for _ in range(STEPS):
    x -= LR * grad(x)
  return x


def numpy_momentum(h):
  x, accum = X0, 0.0
  for _ in range(STEPS):
    accum = h['momentum'] * accum + grad(x)
    x -= LR * accum
  return x


def numpy_adam(h):
  b1, b2, eps = h['adam_beta1'], h['adam_beta2'], h['opt_epsilon']
  x, m, v = X0, 0.0, 0.0
  for t in range(1, STEPS + 1):
    g = grad(x)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    lr_t = LR * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    x -= lr_t * m / (math.sqrt(v) + eps)
  return x


def numpy_rmsprop(h):
  decay, mom, eps = h['rmsprop_decay'], h['rmsprop_momentum'], h['opt_epsilon']
  x, ms, moment = X0, 1.0, 0.0  # TF 1 starts the mean square at one
  for _ in range(STEPS):
    g = grad(x)
    ms = decay * ms + (1 - decay) * g * g
    moment = mom * moment + LR * g / math.sqrt(ms + eps)
    x -= moment
  return x


def numpy_adagrad(h):
  x, accum = X0, h['adagrad_initial_accumulator_value']
  for _ in range(STEPS):
    g = grad(x)
    accum += g * g
    x -= LR * g / math.sqrt(accum)
  return x


def numpy_adadelta(h):
  rho, eps = h['adadelta_rho'], h['opt_epsilon']
  x, accum, accum_update = X0, 0.0, 0.0
  for _ in range(STEPS):
    g = grad(x)
    accum = rho * accum + (1 - rho) * g * g
    update = math.sqrt(accum_update + eps) / math.sqrt(accum + eps) * g
    accum_update = rho * accum_update + (1 - rho) * update * update
    x -= LR * update
  return x


NUMPY_RULES = {'sgd': numpy_sgd, 'momentum': numpy_momentum, 'adam': numpy_adam,
               'rmsprop': numpy_rmsprop, 'adagrad': numpy_adagrad,
               'adadelta': numpy_adadelta}


def run_optimizer(config):
  with tf.Graph().as_default():
    x = tf.Variable(X0, dtype=tf.float64, name='x')
    loss = 0.5 * A * tf.square(x - C)
    train_op = optimization.configure_optimizer(config, LR).minimize(loss)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(STEPS):
        sess.run(train_op)
      return float(sess.run(x))


@pytest.mark.parametrize('name', sorted(NUMPY_RULES))
def test_optimizer_steps_match_numpy_update_rule(name):
  expected = NUMPY_RULES[name](HYPER)
  assert abs(expected - X0) > 1e-3  # the rule moved x: the comparison means something
  got = run_optimizer(TrainConfig(optimizer=name, **HYPER))
  # TF casts the float hyper-parameters to float32: compare the moves, to 1e-6.
  assert got - X0 == pytest.approx(expected - X0, rel=1e-6)


def test_momentum_uses_momentum_not_rmsprop_momentum():
  # Same comparison with the two momenta swapped: each optimizer reads its own flag.
  swapped = dict(HYPER, momentum=0.5, rmsprop_momentum=0.7)
  for name, rule in (('momentum', numpy_momentum), ('rmsprop', numpy_rmsprop)):
    got = run_optimizer(TrainConfig(optimizer=name, **swapped))
    assert got - X0 == pytest.approx(rule(swapped) - X0, rel=1e-6)
    assert got - X0 != pytest.approx(rule(HYPER) - X0, rel=1e-4)


def test_the_global_batch_of_workers_all_reducing_holds_every_workers_batch():
  """Workers without ps (--variable_update=replicated) each run every global step: the
  global batch counts them all, so epochs convert to the same steps as a synchronous job
  aggregating every worker."""
  base = dict(batch_size=8, num_clones=2, worker_replicas=10)
  replicated = TrainConfig(variable_update='replicated', **base)
  sync = TrainConfig(sync_replicas=True, replicas_to_aggregate=10, num_ps_tasks=1, **base)
  asynchronous = TrainConfig(num_ps_tasks=1, **base)
  assert optimization.global_batch_size(replicated) == 160
  assert optimization.global_batch_size(sync) == 160
  assert optimization.global_batch_size(asynchronous) == 16
  assert optimization.warmup_steps(dataclasses.replace(replicated, warmup_epochs=2), 9537) == (
      optimization.warmup_steps(dataclasses.replace(sync, warmup_epochs=2), 9537))
  assert optimization.global_batch_size(TrainConfig(variable_update='replicated',
                                                    batch_size=8, num_clones=2)) == 16
