"""Cloning overhead: examples/sec of one train step at a FIXED global batch, 1 vs N clones.

    python benchmarks/clones.py                    # cifarnet, global batch 128, 1 vs 2
    python benchmarks/clones.py --model_name=lenet --global_batch=256 --rounds=5

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
"""

import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tf_compat  # pylint: disable=wrong-import-position,unused-import
from absl import app, flags  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position

from deployment import model_deploy  # pylint: disable=wrong-import-position
from deployment.session_config import make_session_config  # pylint: disable=wrong-import-position
from nets import nets_factory  # pylint: disable=wrong-import-position
from tf_compat import tf  # pylint: disable=wrong-import-position

flags.DEFINE_string('model_name', 'cifarnet', 'Network from the nets registry.')
flags.DEFINE_integer('global_batch', 128, 'Examples per step, split over the clones.')
flags.DEFINE_list('num_clones', ['1', '2'], 'Clone counts to compare; the first is the '
                  'baseline.')
flags.DEFINE_integer('channels', 3, 'Input channels.')
flags.DEFINE_integer('num_classes', 10, 'Classes of the synthetic labels.')
flags.DEFINE_integer('warmup_steps', 5, 'Untimed steps per measurement.')
flags.DEFINE_integer('steps', 30, 'Timed steps per measurement.')
flags.DEFINE_integer('rounds', 7, 'Alternating rounds; medians are reported.')
FLAGS = flags.FLAGS


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


def _measure(model_name, num_clones):
  """examples/sec over FLAGS.steps steps after FLAGS.warmup_steps."""
  graph, train_op, init, config = _build(model_name, num_clones, FLAGS.global_batch,
                                         FLAGS.channels, FLAGS.num_classes)
  with tf.Session(graph=graph, config=make_session_config(config)) as sess:
    sess.run(init)
    for _ in range(FLAGS.warmup_steps):
      sess.run(train_op)
    start = time.perf_counter()
    for _ in range(FLAGS.steps):
      sess.run(train_op)
    elapsed = time.perf_counter() - start
  return FLAGS.steps * FLAGS.global_batch / elapsed


def main(argv):
  del argv
  clone_counts = [int(n) for n in FLAGS.num_clones]
  for n in clone_counts:
    if n < 1 or FLAGS.global_batch % n:
      raise app.UsageError('--global_batch=%d must split evenly over %d clones'
                           % (FLAGS.global_batch, n))
  _measure(FLAGS.model_name, clone_counts[0])  # Warm-up: the first run is always slow.
  samples = {n: [] for n in clone_counts}
  for _ in range(FLAGS.rounds):
    for n in clone_counts:
      samples[n].append(_measure(FLAGS.model_name, n))
  baseline = samples[clone_counts[0]]
  for n in clone_counts:
    ratios = [s / b for s, b in zip(samples[n], baseline)]
    print(json.dumps({'model': FLAGS.model_name, 'global_batch': FLAGS.global_batch,
                      'num_clones': n,
                      'examples_per_sec': round(statistics.median(samples[n]), 1),
                      'rounds': [round(s, 1) for s in samples[n]],
                      'median_ratio_to_baseline': round(statistics.median(ratios), 3),
                      'ratios': [round(r, 3) for r in ratios]}))
  print('machine: %s, %d cores, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__))


if __name__ == '__main__':
  app.run(main)
