"""training/optimizer_checks.py: an optimizer and a schedule the rules accept, and one line
naming the flag for each kind of mistake (the whole config's checks: test_setup.py)."""

import dataclasses

import pytest

from core.params import ConfigError
from training.config import TrainConfig
from training import optimizer_checks

CONFIG = TrainConfig(train_dir='/tmp/unused')


def test_the_defaults_pass():
  optimizer_checks.check_optimizer(CONFIG)
  optimizer_checks.check_learning_rate(CONFIG)


@pytest.mark.parametrize('changes, message', [
    (dict(optimizer='lamb'), '--optimizer=lamb is not known; valid: '),
    (dict(momentum=1.0), '--momentum=1.0 must be in [0, 1)'),
    (dict(ftrl_learning_rate_power=0.5), '--ftrl_learning_rate_power=0.5 must be <= 0'),
    (dict(moving_average_decay=1.0), '--moving_average_decay=1.0 must be in (0, 1)'),
])
def test_optimizer_mistakes_name_the_flag(changes, message):
  with pytest.raises(ConfigError) as error:
    optimizer_checks.check_optimizer(dataclasses.replace(CONFIG, **changes))
  assert message in str(error.value)


@pytest.mark.parametrize('changes, message', [
    (dict(learning_rate_decay_type='stairs'), '--learning_rate_decay_type=stairs is not known'),
    (dict(learning_rate_decay_type='piecewise', learning_rate_boundaries=[10],
          learning_rate_values=[0.1]), 'needs one more value than --learning_rate_boundaries'),
    (dict(learning_rate_decay_type='piecewise', learning_rate_boundaries=[20, 10],
          learning_rate_values=[0.1, 0.01, 0.001]), 'must be increasing positive global steps'),
])
def test_schedule_mistakes_name_the_flag(changes, message):
  with pytest.raises(ConfigError) as error:
    optimizer_checks.check_learning_rate(dataclasses.replace(CONFIG, **changes))
  assert message in str(error.value)
