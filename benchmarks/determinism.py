"""What --deterministic costs: a training step with TensorFlow's op determinism off and on.

    python -m benchmarks.determinism                      # cifarnet, batch 64, 2 clones
    python -m benchmarks.determinism --model_name=lenet --global_batch=128

The step is `benchmarks.clones`' (synthetic in-graph batches, 2 clones on logical CPU
devices, SGD), built twice, each in its own session; op determinism (a process-wide
switch) is turned on before every call of the one and off before every call of the other,
the first call included, which is when a session builds its kernels. Timed in the
doctor's alternating rounds; the ratio is the median of the per-round ratios of on to off
(docs/benchmarks.md, "What --deterministic costs"). Run from the repository root.
Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform
import statistics

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags
from tensorflow.python.framework import config as tf_config  # Op determinism's switch.

from benchmarks import clones
from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from tf_compat import tf
from training.doctor import rounds


@dataclasses.dataclass(frozen=True)
class DeterminismSettings:
  """The step timed; `check_settings` holds its rule."""
  model_name: str = param('cifarnet', 'Network from the nets registry.')
  global_batch: int = param(64, 'Examples per step, split over the clones.')
  num_clones: int = param(2, 'Clones on logical CPU devices.')
  steps: int = param(10, 'Timed steps of each per round.')
  rounds: int = param(5, 'Alternating rounds after a warm-up one; medians are reported.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).


def check_settings(settings):
  """Returns settings; raises ConfigError naming the flag."""
  for name in ('global_batch', 'num_clones', 'steps', 'rounds'):
    errors.require(getattr(settings, name) > 0, '--%s=%d must be > 0'
                   % (name, getattr(settings, name)))
  clones.check_settings(_clone_settings(settings))
  return settings


def _clone_settings(settings):
  return clones.ClonesSettings(model_name=settings.model_name,
                               global_batch=settings.global_batch,
                               num_clones=(settings.num_clones,))


def _timed(component, deterministic, steps):
  """fn(round) -> seconds per step, with op determinism set as `deterministic` first."""
  def run(_):
    (tf_config.enable_op_determinism if deterministic
     else tf_config.disable_op_determinism)()
    return rounds.seconds_per_call(lambda: component.session.run(component.fetch), steps)
  return run


def compare(settings):
  """Times the step with op determinism off and on; prints and returns one dict."""
  before = tf_config.is_op_determinism_enabled()
  built = {mode: clones.component(_clone_settings(settings), settings.num_clones, seed=1)
           for mode in ('off', 'on')}
  for component in built.values():
    component.session = tf.Session(graph=component.graph, config=component.session_config)
    for op in component.init:   # in turn: a replicated sync reads what init wrote
      component.session.run(op)
  try:
    found = rounds.alternate({mode: _timed(built[mode], mode == 'on', settings.steps)
                              for mode in ('off', 'on')}, settings.rounds, flip=True)
  finally:
    (tf_config.enable_op_determinism if before else tf_config.disable_op_determinism)()
    for component in built.values():
      component.session.close()
  ratio, ratios = rounds.median_ratio(found.samples['on'], found.samples['off'])
  line = {'model': settings.model_name, 'global_batch': settings.global_batch,
          'num_clones': settings.num_clones,
          'sec_per_step_off': round(statistics.median(found.samples['off']), 4),
          'sec_per_step_on': round(statistics.median(found.samples['on']), 4),
          'on_over_off': ratio, 'ratios': ratios}
  print(json.dumps(line))
  print('machine: %s, %d cores, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__))
  return line


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(DeterminismSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  compare(settings)
  return errors.OK


if __name__ == '__main__':
  define_flags(DeterminismSettings)
  app.run(main, flags_parser=parse_flags)
