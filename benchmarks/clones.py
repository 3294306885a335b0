"""Cloning overhead: examples/sec of one train step at a FIXED global batch, 1 vs N clones.

    python -m benchmarks.clones                    # cifarnet, global batch 128, 1 vs 2
    python -m benchmarks.clones --model_name=lenet --global_batch=256 --rounds=5

Inputs are synthetic (a fixed random batch repeated by tf.data, drawn through the same
per-clone iterator path as training), so the figure measures model_deploy, not decoding.
Clones run on logical CPU devices (`clone_on_cpu`), the only devices here; the ratio is
the cost of splitting the batch, summing gradients and running N towers, which is what
multi-GPU users pay on top of the GPUs themselves. Configurations alternate over
`--rounds` rounds in one process and the median of each is reported, so both see the
same machine state. This machine's run-to-run noise is about +-15 %, more than the
effect measured, so the figure that counts is the median over rounds of the per-round
ratio (each configuration against the baseline measured right before it), after one
discarded warm-up measurement. Prints one JSON line per configuration and a summary.
Run from the repository root. Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform
import statistics
import time

import tf_compat  # pylint: disable=unused-import  (first: TF set-up before anything else)
from absl import app, flags
import numpy as np

from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment import model_deploy
from deployment.session.session_config import make_session_config
from nets import nets_factory
from resolve import names
from tf_compat import tf


@dataclasses.dataclass(frozen=True)
class ClonesSettings:
  """What the cloning benchmark compares; `check_settings` holds its rule."""
  # Model and batch.
  model_name: str = param('cifarnet', 'Network from the nets registry.')
  global_batch: int = param(128, 'Examples per step, split over the clones.')
  num_clones: tuple[int, ...] = param((1, 2), 'Clone counts to compare; the first is the '
                                      'baseline.')
  channels: int = param(3, 'Input channels.')
  num_classes: int = param(10, 'Classes of the synthetic labels.')
  # Timing.
  warmup_steps: int = param(5, 'Untimed steps per measurement.')
  steps: int = param(30, 'Timed steps per measurement.')
  rounds: int = param(7, 'Alternating rounds; medians are reported.')


define_flags(ClonesSettings)
FLAGS = flags.FLAGS


def check_settings(settings):
  """Returns `settings` if the network is known and every clone count splits the global
  batch; else ConfigError naming the flag."""
  names.network_spec(settings.model_name)
  if not settings.num_clones:
    raise errors.ConfigError('--num_clones is empty: give the clone counts, e.g. 1,2')
  for n in settings.num_clones:
    if n < 1 or settings.global_batch % n:
      raise errors.ConfigError('--global_batch=%d must split evenly over %d clones (from '
                               '--num_clones)' % (settings.global_batch, n))
  return settings


def _build(model_name, num_clones, global_batch, channels, num_classes):
  """Builds a train op for `num_clones` CPU clones; returns (graph, train_op, config)."""
  config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  spec = nets_factory.get_network_spec(model_name)
  size = spec.default_image_size
  per_clone = global_batch // num_clones
  rng = np.random.RandomState(0)
  images = rng.uniform(-1, 1, (per_clone, size, size, channels)).astype(np.float32)
  labels = rng.randint(0, num_classes, per_clone).astype(np.int64)
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(config.inputs_device()):
      dataset = tf.data.Dataset.from_tensors((images, labels)).repeat().prefetch(2)
      iterator = tf.data.make_one_shot_iterator(dataset)
    network_fn = nets_factory.get_network_fn(model_name, num_classes, is_training=True)

    def clone_fn():
      with tf.device(config.inputs_device()):
        batch_images, batch_labels = iterator.get_next()
      logits, _ = network_fn(batch_images)
      tf.losses.sparse_softmax_cross_entropy(batch_labels, logits)

    deployed = model_deploy.deploy(config, clone_fn,
                                   optimizer=tf.train.GradientDescentOptimizer(0.01))
    init = tf.global_variables_initializer()
  return graph, deployed.train_op, init, config


def measure(settings, num_clones):
  """examples/sec over settings.steps steps after settings.warmup_steps."""
  graph, train_op, init, config = _build(settings.model_name, num_clones,
                                         settings.global_batch, settings.channels,
                                         settings.num_classes)
  with tf.Session(graph=graph, config=make_session_config(config)) as sess:
    sess.run(init)
    for _ in range(settings.warmup_steps):
      sess.run(train_op)
    start = time.perf_counter()
    for _ in range(settings.steps):
      sess.run(train_op)
    elapsed = time.perf_counter() - start
  return settings.steps * settings.global_batch / elapsed


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
  """Measures every clone count once per round after one warm-up measurement; prints one
  JSON line per clone count (medians, ratios to the first count) and a machine line."""
  clone_counts = settings.num_clones
  measure(settings, clone_counts[0])  # Warm-up: the first run is always slow.
  samples = {n: [] for n in clone_counts}
  for _ in range(settings.rounds):
    for n in clone_counts:
      samples[n].append(measure(settings, n))
  baseline = samples[clone_counts[0]]
  for n in clone_counts:
    ratios = [s / b for s, b in zip(samples[n], baseline)]
    print(json.dumps({'model': settings.model_name, 'global_batch': settings.global_batch,
                      'num_clones': n,
                      'examples_per_sec': round(statistics.median(samples[n]), 1),
                      'rounds': [round(s, 1) for s in samples[n]],
                      'median_ratio_to_baseline': round(statistics.median(ratios), 3),
                      'ratios': [round(r, 3) for r in ratios]}))
  print('machine: %s, %d cores, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__))


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
