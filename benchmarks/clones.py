"""Cloning overhead: examples/sec of one train step at a FIXED global batch, 1 vs N clones.

    python -m benchmarks.clones                    # cifarnet, global batch 128, 1 vs 2
    python -m benchmarks.clones --model_name=lenet --global_batch=256 --rounds=5
    python -m benchmarks.clones --variable_updates=parameter_server,replicated

Inputs are synthetic (a fixed random batch repeated by tf.data, drawn through the same
per-clone iterator path as training), so the figure measures model_deploy, not decoding.
Clones run on logical CPU devices (`clone_on_cpu`), the only devices here; the ratio is
the cost of splitting the batch, summing gradients and running N towers, which is what
multi-GPU users pay on top of the GPUs themselves. Each configuration is a doctor
`Component` timed by the doctor's harness (training/doctor/measure.py): every session
opened first, one untimed round of `--warmup_steps` steps of each, then `--rounds` rounds
of `--steps` steps of each in turn, so all see the same machine state; the median of each
is reported. This machine's run-to-run noise is about +-15 %, more than the effect
measured, so the figure that counts is the median over rounds of the per-round ratio
(each configuration against the baseline measured in the same round). Prints one JSON
line per configuration and a summary.

`--variable_updates` adds model_deploy's variable updates side by side (issue 40):
`parameter_server` (one copy of the variables, the clones' gradients summed on one
device: slim's, the default) and `replicated` (a copy per clone, synced from clone 0
after init, the gradients packed into `--gradient_repacking` tensors and all-reduced
with CollectiveReduce). Every clone count runs with each, in the same rounds, except
replicated at 1 clone (nothing to all-reduce); the baseline stays the first count with
the first update, and each replicated line also gives its ratio to parameter_server at
the same count (`median_ratio_to_parameter_server`, per round).
Run from the repository root. Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags
import numpy as np

from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment import model_deploy
from deployment.session.session_config import make_session_config
from nets import nets_factory
from resolve import names
from resolve.network import NetworkSettings, build_network
from tf_compat import tf
from training.doctor import measure, rounds
from training.doctor.settings import DoctorSettings


@dataclasses.dataclass(frozen=True)
class ClonesSettings:
  """What the cloning benchmark compares; `check_settings` holds its rule."""
  # Model and batch.
  model_name: str = param('cifarnet', 'Network from the nets registry.')
  global_batch: int = param(128, 'Examples per step, split over the clones.')
  num_clones: tuple[int, ...] = param((1, 2), 'Clone counts to compare; the first is the '
                                      'baseline.')
  variable_updates: tuple[str, ...] = param(
      ('parameter_server',), 'Variable updates to compare at every clone count (%s); the '
      'first is the baseline\'s.' % ', '.join(model_deploy.VARIABLE_UPDATES))
  gradient_repacking: int = param(2, 'With replicated: flat tensors the gradients are '
                                  'packed into before the all-reduce (the trainer\'s '
                                  'default).')
  channels: int = param(3, 'Input channels.')
  num_classes: int = param(10, 'Classes of the synthetic labels.')
  # Timing.
  warmup_steps: int = param(5, 'Untimed steps of each configuration, in a round before the '
                            'timed ones.')
  steps: int = param(30, 'Timed steps of each configuration per round.')
  rounds: int = param(7, 'Alternating rounds; medians are reported.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).


def check_settings(settings):
  """Returns `settings` if the network is known and every clone count splits the global
  batch; else ConfigError naming the flag."""
  names.network_spec(settings.model_name)
  if not settings.num_clones:
    raise errors.ConfigError('--num_clones is empty: give the clone counts, e.g. 1,2')
  for flag in ('steps', 'rounds'):
    errors.require(getattr(settings, flag) >= 1, '--%s=%d must be >= 1'
                   % (flag, getattr(settings, flag)))
  errors.require(settings.warmup_steps >= 0, '--warmup_steps=%d must be >= 0'
                 % settings.warmup_steps)
  errors.require(settings.variable_updates and set(settings.variable_updates) <= set(
      model_deploy.VARIABLE_UPDATES), '--variable_updates=%s: give one or more of %s' % (
          ','.join(settings.variable_updates), ', '.join(model_deploy.VARIABLE_UPDATES)))
  errors.require(settings.gradient_repacking >= 1, '--gradient_repacking=%d must be >= 1'
                 % settings.gradient_repacking)
  for n in settings.num_clones:
    if n < 1 or settings.global_batch % n:
      raise errors.ConfigError('--global_batch=%d must split evenly over %d clones (from '
                               '--num_clones)' % (settings.global_batch, n))
  return settings


def component(settings, num_clones, seed=None, variable_update='parameter_server'):
  """A train op for `num_clones` CPU clones as the doctor's `measure.Component`: one step
  is settings.global_batch examples, split over the clones; `seed`: the graph's (op
  determinism wants every random op seeded); `variable_update`: model_deploy's (replicated
  copies synced from clone 0 by the init op, as the trainer does)."""
  config = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_on_cpu=True, variable_update=variable_update,
      gradient_repacking=settings.gradient_repacking)
  spec = nets_factory.get_network_spec(settings.model_name)
  size = spec.default_image_size
  per_clone = settings.global_batch // num_clones
  rng = np.random.RandomState(0)
  images = rng.uniform(-1, 1, (per_clone, size, size, settings.channels)).astype(np.float32)
  labels = rng.randint(0, settings.num_classes, per_clone).astype(np.int64)
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed)
    with tf.device(config.inputs_device()):
      dataset = tf.data.Dataset.from_tensors((images, labels)).repeat().prefetch(2)
      iterator = tf.data.make_one_shot_iterator(dataset)
    network_fn = build_network(NetworkSettings(settings.model_name, settings.num_classes,
                                               is_training=True))

    def clone_fn():
      with tf.device(config.inputs_device()):
        batch_images, batch_labels = iterator.get_next()
      logits, _ = network_fn(batch_images)
      tf.losses.sparse_softmax_cross_entropy(batch_labels, logits)

    deployed = model_deploy.deploy(config, clone_fn,
                                   optimizer=tf.train.GradientDescentOptimizer(0.01))
    init = measure.initialize_and_sync()
  return measure.Component(
      _name(num_clones, variable_update), num_clones, settings.global_batch, graph, init,
      deployed.train_op, make_session_config(config))


def _name(num_clones, variable_update):
  return '%d clone(s), %s' % (num_clones, variable_update)


def configurations(settings):
  """[(clones, variable update)]: every count with every update but replicated at 1
  clone (nothing to all-reduce); the first is the baseline."""
  return [(n, update) for n in settings.num_clones for update in settings.variable_updates
          if n > 1 or update != 'replicated']


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(ClonesSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  compare(settings)
  return errors.OK


def compare(settings):
  """Times every configuration (`configurations`) in the doctor's alternating rounds;
  prints one JSON line per configuration (medians, ratios to the first; a replicated
  one's to parameter_server at the same count too) and a machine line. Returns the
  lines' dicts."""
  chosen = configurations(settings)
  found, _ = measure.measure(
      [component(settings, n, variable_update=update) for n, update in chosen],
      DoctorSettings(doctor_rounds=settings.rounds, doctor_steps=settings.steps,
                     doctor_warmup_steps=settings.warmup_steps))
  by_configuration = dict(zip(chosen, found))
  lines = []
  for (n, update), row in by_configuration.items():
    median, ratios = rounds.median_ratio(row.round_rates, found[0].round_rates)
    line = {'model': settings.model_name, 'global_batch': settings.global_batch,
            'num_clones': n, 'variable_update': update,
            'examples_per_sec': round(row.examples_per_sec, 1),
            'rounds': [round(s, 1) for s in row.round_rates],
            'median_ratio_to_baseline': median, 'ratios': ratios}
    server = by_configuration.get((n, 'parameter_server'))
    if update == 'replicated':
      line['gradient_repacking'] = settings.gradient_repacking
      if server is not None:
        line['median_ratio_to_parameter_server'], line['ratios_to_parameter_server'] = (
            rounds.median_ratio(row.round_rates, server.round_rates))
    lines.append(line)
    print(json.dumps(line))
  print('machine: %s, %d cores, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__))
  return lines


if __name__ == '__main__':
  define_flags(ClonesSettings)
  app.run(main, flags_parser=parse_flags)
