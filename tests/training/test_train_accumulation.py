"""--num_micro_batches end to end: K=2 micro-batches of batch b update like one batch of 2b.

As in tests/global_batch.py, the data order is equal by construction: the
dataset has 2 shards of 8 examples, an epoch is shuffled then repeated, so each step of
the reference (one clone, batch 16) is the whole dataset, and so are the 2 micro-batches
x clones of the runs compared with it (1 clone of 8, 2 clones of 4); each synchronous
worker reads its own shard, whose 8 examples are its 2 micro-batches of 4. All runs start
from one checkpoint. The network is softmax regression, smooth in the weights, so the
different float32 order of the sums stays round-off (that file says why not LeNet).

Every run fetches its summaries with every step (--save_summaries_steps=1): the summary
op runs inside the step, on the batches the step draws, so the micro-batches of a step
get the same examples as without it (a batch drawn for the summaries alone would shift
them by half an epoch).

The claim checked: every parameter after 5 steps, as one vector, within 1e-5 relative
(L2) of the reference; global_step 5, one update per step; the global batch (16) in the
start-up log, TensorBoard's run topology and the progress lines' examples count.
"""

import glob
import logging
import os
import subprocess

import numpy as np
import pytest

import training.train as train_module
from deployment import sync_replicas
from tests.cluster_tasks import ROOT, assert_clean_log, checkpoint_steps, train_flags
from tests.cluster_tasks import WAIT_SECS
from tests.global_batch import MODEL_VARIABLES, checkpoint_values, write_aligned_dataset
from tests.launch_local_runs import environment, launcher_argv
from tf_compat import tf
from training.config import TrainConfig
from training.progress import ProgressStep

pytestmark = pytest.mark.slow

PER_SHARD = 8
GLOBAL_BATCH = 2 * PER_SHARD
STEPS = 5


def topology_text(train_dir):
  """The run/topology text summary of the run's events."""
  for path in glob.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag.startswith('run/topology'):
          return value.tensor.string_val[0].decode()
  raise AssertionError('no run/topology summary in %s' % train_dir)


def relative(a, b):
  return np.linalg.norm(a - b) / np.linalg.norm(b)


def flat(values):
  return np.concatenate([values[name].ravel() for name in MODEL_VARIABLES])


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """(common settings, start checkpoint, reference values after STEPS steps)."""
  root = tmp_path_factory.mktemp('accumulation')
  data = write_aligned_dataset(root / 'data', PER_SHARD)
  common = dict(dataset_name='image_folder', dataset_dir=data,
                model_name='softmax_regression', optimizer='sgd', learning_rate=0.1,
                learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
                log_every_n_steps=STEPS, save_interval_secs=600, save_summaries_steps=1)
  start = train_module.train(TrainConfig(
      train_dir=str(root / 'start'), max_number_of_steps=1, batch_size=GLOBAL_BATCH,
      **common)).checkpoint
  result = train_module.train(TrainConfig(
      train_dir=str(root / 'big_batch'), max_number_of_steps=STEPS, checkpoint_path=start,
      batch_size=GLOBAL_BATCH, **common))
  assert result.global_step == STEPS
  big_batch = flat(checkpoint_values(result.checkpoint))
  assert relative(flat(checkpoint_values(start)), big_batch) > 1e-2  # Training moved it.
  return common, start, big_batch


@pytest.fixture
def examples_per_step(monkeypatch):
  """The examples per step each ProgressStep of train() counts (its progress lines)."""
  counted = []

  class Counting(ProgressStep):
    def __init__(self, lines, *args, **kwargs):
      counted.append(lines.examples_per_step)
      super().__init__(lines, *args, **kwargs)

  monkeypatch.setattr(train_module, 'ProgressStep', Counting)
  return counted


@pytest.mark.parametrize('num_clones', [1, 2])
def test_two_micro_batches_train_like_one_batch_twice_as_big(
    reference, tmp_path, num_clones, caplog, examples_per_step):
  common, start, big_batch = reference
  batch = GLOBAL_BATCH // (2 * num_clones)
  caplog.set_level(logging.INFO)
  result = train_module.train(TrainConfig(
      train_dir=str(tmp_path / 'train'), max_number_of_steps=STEPS, checkpoint_path=start,
      batch_size=batch, num_clones=num_clones, clone_on_cpu=True, num_micro_batches=2,
      **common))
  assert result.global_step == STEPS
  assert relative(flat(checkpoint_values(result.checkpoint)), big_batch) <= 1e-5
  assert ('Batch: %d per clone x 2 micro-batches, 16 per worker step, 16 global'
          % batch) in caplog.text
  assert examples_per_step == [GLOBAL_BATCH]
  assert ('| batch | %d per clone x 2 micro-batches, 16 per worker step, 16 global |'
          % batch) in topology_text(str(tmp_path / 'train'))


@pytest.mark.cluster
def test_two_sync_workers_of_two_micro_batches_train_like_one_batch_four_times_as_big(
    reference, tmp_path):
  common, start, big_batch = reference
  train_dir = tmp_path / 'cluster'
  flags = train_flags(common['dataset_dir'], train_dir, batch_size=PER_SHARD // 2,
                      num_micro_batches=2, sync_replicas=True, replicas_to_aggregate=2,
                      max_number_of_steps=STEPS, sync_trace=True, checkpoint_path=start,
                      **{k: v for k, v in common.items() if k != 'dataset_dir'})
  log_dir = train_dir / 'logs'
  result = subprocess.run(launcher_argv(1, 2, flags, '--task_log_dir=%s' % log_dir),
                          cwd=ROOT, env=environment(), capture_output=True, text=True,
                          timeout=WAIT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  for path in glob.glob(str(log_dir / '*.log')):
    assert_clean_log(open(path).read(), os.path.basename(path))
  chief = (log_dir / 'worker-0.log').read_text()
  assert 'Batch: 4 per clone x 2 micro-batches, 8 per worker step, 16 global' in chief
  # One gradient per worker per update, each the mean of that worker's 2 micro-batches.
  trace = sync_replicas.read_trace(str(train_dir / train_module.SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(STEPS)], trace
  assert checkpoint_steps(train_dir)[-1] == STEPS
  cluster = flat(checkpoint_values(str(train_dir / ('model.ckpt-%d' % STEPS))))
  assert relative(cluster, big_batch) <= 1e-5
