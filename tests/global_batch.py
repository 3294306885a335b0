"""The reference a synchronous cluster is checked against: ONE worker of the global batch.

The numerical tests (tests/deployment/test_launch_local.py, the all-reduce one in
tests/deployment/cluster/test_launch_local_allreduce.py, the Slurm recipe's) compare 2
synchronous workers of per-worker batch b with ONE worker of batch 2b (an independent,
single-process run). Data order is made identical by construction: the dataset has
exactly 2 shards of b examples. Worker k reads shard k only, and since an epoch of its
shard is exactly one batch, every batch of worker k is the whole of shard k (shuffling
only reorders it); every batch of the single worker is the whole dataset, i.e. shard 0 +
shard 1. A synchronous update averages the two workers' mean gradients = the mean
gradient over 2b examples. Both runs start from the same checkpoint (fine-tuning from it
restores every variable). The chief records which worker's gradient, for which step, each
update took (--sync_trace): every update must take one gradient from each worker, at its
step.

The network is softmax regression, whose loss is smooth in the weights: the two runs add
the same gradients in a different float32 order (the mean of 16 against the mean of two
means of 8), and that round-off must stay round-off. With LeNet it does not: a ReLU whose
input lies within round-off of zero is on in one run and off in the other, and the runs
part by up to 2e-4 relative after 5 steps (the single-process run alone, from one
checkpoint, gave 3 results that far apart in 3 runs), which failed this test in about
one run of five whatever the aggregation did. A wrong aggregation (a worker's gradient
dropped or counted twice) changes a step's update by the order of the update itself.

Round-off is measured against how far the run moved each variable (the L2 distance from
the start checkpoint), not against the variable's own norm: the biases cross zero, so
their norm can be as small as any difference. Unseeded shuffles reorder each batch, so
even the single-process run gives another round-off each time: 6 runs of it from one
checkpoint were 1.6e-7 to 3.9e-7 of the movement apart, 4 cluster runs 5.6e-7 to 1.1e-6
from the reference (2 of them beside two busy processes), and the cluster run that failed
the former bound on the variable's own norm (the biases 1.17e-5 > 1e-5 apart, under
load) about 5e-6 of their movement. A gradient dropped or counted twice in one of the 5
updates moves a variable by a tenth of its movement or more.

The claim checked: all parameters after 5 steps differ from the reference by at most
1e-4 of the reference's movement from the start (L2), as one vector and each variable
alone.
"""

import io

import numpy as np
from PIL import Image

from datasets.conversion import shard_writer
from datasets.formats import image_records
from tests.cluster_tasks import train_flags
from tf_compat import tf
from training.config import TrainConfig
from training.train import train

MODEL_VARIABLES = ('SoftmaxRegression/logits/weights', 'SoftmaxRegression/logits/biases')
PER_WORKER_BATCH = 8
STEPS = 5


def write_aligned_dataset(directory, per_shard, num_shards=2):
  """image_folder records: train = `num_shards` (2) x `per_shard` RGB digits, written
  into that many shards."""
  from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  data = load_digits()

  def records(indices):
    for i in indices:
      grey = ((data.images[i].astype(np.int64) * 255 + 8) // 16).astype(np.uint8)
      buffer = io.BytesIO()
      Image.fromarray(np.stack([grey] * 3, axis=-1)).save(buffer, format='PNG')
      yield image_records.image_to_example(buffer.getvalue(), b'png', int(data.target[i]),
                                           8, 8, 3).SerializeToString()

  train_indices = list(range(num_shards * per_shard))
  test_indices = list(range(num_shards * per_shard, num_shards * per_shard + 4))
  shard_writer.write_converted_dataset(
      str(directory), 'image_folder', [str(d) for d in range(10)], 3,
      {'train': (records(train_indices), len(train_indices)),
       'test': (records(test_indices), len(test_indices))}, num_shards=num_shards)
  return str(directory)


def checkpoint_values(path):
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name in MODEL_VARIABLES}


def sync_reference(tmp_path, steps=STEPS):
  """The aligned data, a start checkpoint and ONE worker of batch 2b trained `steps` steps
  from it; returns (cluster flags for 2 workers of batch b into tmp_path/'cluster',
  reference checkpoint, start checkpoint)."""
  data = write_aligned_dataset(tmp_path / 'data', PER_WORKER_BATCH)
  common = dict(dataset_name='image_folder', dataset_dir=data,
                model_name='softmax_regression', optimizer='sgd', learning_rate=0.1,
                learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
                log_every_n_steps=min(steps, 10), save_interval_secs=600,
                save_summaries_secs=600)
  start = train(TrainConfig(train_dir=str(tmp_path / 'start'), max_number_of_steps=1,
                            batch_size=2 * PER_WORKER_BATCH, **common)).checkpoint
  reference = train(TrainConfig(
      train_dir=str(tmp_path / 'single'), max_number_of_steps=steps, checkpoint_path=start,
      batch_size=2 * PER_WORKER_BATCH, **common))
  assert reference.global_step == steps
  flags = train_flags(data, tmp_path / 'cluster', batch_size=PER_WORKER_BATCH,
                      sync_replicas=True, replicas_to_aggregate=2, max_number_of_steps=steps,
                      sync_trace=True, checkpoint_path=start,
                      **{k: v for k, v in common.items() if k != 'dataset_dir'})
  return flags, reference.checkpoint, start


def assert_equivalent(cluster_checkpoint, reference_checkpoint, start):
  """All parameters within 1e-4 of the reference's movement from `start` (L2), as one
  vector and each variable; returns (the largest absolute difference, the L2 difference
  over the L2 movement)."""
  single = checkpoint_values(reference_checkpoint)
  cluster = checkpoint_values(cluster_checkpoint)
  initial = checkpoint_values(start)
  flat = lambda values: np.concatenate([values[n].ravel() for n in MODEL_VARIABLES])
  of_movement = lambda a, b, start: np.linalg.norm(a - b) / np.linalg.norm(b - start)
  for name in MODEL_VARIABLES:   # Each variable moved: not trivially equal.
    assert np.linalg.norm(single[name] - initial[name]) > 1e-2 * np.linalg.norm(single[name])
  assert of_movement(flat(cluster), flat(single), flat(initial)) <= 1e-4
  for name in MODEL_VARIABLES:
    assert of_movement(cluster[name], single[name], initial[name]) <= 1e-4, name
  return (float(np.max(np.abs(flat(cluster) - flat(single)))),
          float(of_movement(flat(cluster), flat(single), flat(initial))))
