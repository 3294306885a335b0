"""Evaluates an image classifier checkpoint on a whole split: slim's Accuracy and Recall@5,
counted (top-1 and top-5 of `evaluation.metrics`), and the per-class figures of the same
predictions.

Every example of the split is seen exactly once (no dropped remainder), batch norm runs
in inference mode, and with `moving_average_decay` the averaged weights are restored (as
the training run kept them). Variables carry no clone prefix, so a checkpoint trained
with any number of clones or workers evaluates the same on one device.

The logits and labels of every batch are kept (N x C float32: 200 MB for ImageNet's
50,000 x 1,000) for `metrics` (top-1 and top-5 counts, per-class accuracy, confusion
matrix); `accuracy` and `recall_at_5` are its counts over N, not a streaming float32
ratio (which put exactly 342 of 360 below 0.95). Nothing is written here:
`evaluation.run` writes the summaries and the report.
"""

import collections

from absl import logging
import numpy as np

from checkpoints import restore
from deployment.precision import network_in_precision
from deployment.session_config import session_config_for
from core.errors import DataError
from core.params import ConfigError
from datasets import damaged_shards
from datasets.inputs import image_input
from evaluation.config import EvalConfig
from evaluation.metrics import accuracy_text, classification_metrics
from evaluation.progress import SplitProgress, expected_examples
from evaluation.setup import network_kwargs
from nets import nets_factory
from tf_compat import tf

__all__ = ['EvalConfig', 'EvalResult', 'evaluate']

EvalResult = collections.namedtuple(
    'EvalResult', ['accuracy', 'recall_at_5', 'num_examples', 'global_step', 'checkpoint',
                   'metrics', 'moving_averages', 'unscored', 'not_read'], defaults=((), 0))
EvalResult.__doc__ = """accuracy, recall_at_5: slim's figures, metrics.top1 and
metrics.top5 (counts over num_examples); metrics: the
evaluation.metrics.ClassificationMetrics of the predictions; moving_averages: whether the averaged weights were evaluated; unscored:
(('record N of <shard>', reason), ...) the images read but not scored (they do not
decode); not_read: images dataset_info.json lists that the records lack. The figures are
over the scored images only."""


def _build_graph(setup, split):
  """Returns (logits [b, C], labels [b], where [b], damage [b]); the metrics count only
  the images that decoded (damage '')."""
  config = setup.config
  network_fn = network_in_precision(nets_factory.get_network_fn(
      config.model_name, num_classes=setup.num_classes, is_training=False,
      **network_kwargs(config)), config.mixed_precision)
  with tf.device('/device:CPU:0'):
    dataset = image_input.build_image_dataset(split, setup.input_settings,
                                              is_training=False)
    images, labels, where, damage = tf.data.make_one_shot_iterator(dataset).get_next()
  logits, _ = network_fn(images)
  return logits, labels, where, damage


def _restore_plan(config, split, checkpoint):
  """Every variable of the inference graph from the checkpoint (the moving averages with
  --moving_average_decay)."""
  offset = ' with --labels_offset=%d' % config.labels_offset if config.labels_offset else ''
  fit = restore.ModelFit(model_name=config.model_name,
                         num_classes=split.num_classes - config.labels_offset,
                         channels=split.num_channels,
                         data_flag='dataset_dir=%s%s' % (config.dataset_dir, offset))
  return restore.plan_inference(checkpoint, tf.global_variables(), fit,
                                'true' if config.moving_average_decay else 'false')


def _progress(setup):
  total = expected_examples(setup.streams[0].split.num_samples, setup.batch_size,
                            setup.config.max_num_batches)
  return SplitProgress('image', total, 'images', setup.batch_size,
                       setup.config.log_every_n_batches)


def _restore(sess, saver, checkpoint):
  try:
    saver.restore(sess, checkpoint)
  except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as error:
    # The plan checked names and shapes: the files went away or are damaged.
    raise ConfigError('--checkpoint_path=%s could not be read: %s'
                      % (checkpoint, str(error).split('\n')[0])) from None


def evaluate(setup, checkpoint=None):
  """Evaluates `checkpoint` (default: --checkpoint_path's) on the split; returns an
  EvalResult. `setup` is check_eval_config's.

  Raises:
    ConfigError: the checkpoint does not fit the model or cannot be read.
  """
  config, split = setup.config, setup.streams[0].split
  checkpoint = checkpoint or setup.streams[0].checkpoint
  with tf.Graph().as_default():
    outputs = _build_graph(setup, split)
    plan = _restore_plan(config, split, checkpoint)
    saver = restore.make_saver(plan)
    with tf.Session(config.master, config=session_config_for(config)) as sess:
      _restore(sess, saver, checkpoint)
      arrays = _run_batches(sess, list(outputs), _progress(setup),
                            config.max_num_batches, split)
  if arrays is None:
    raise ConfigError('--dataset_dir=%s: the %s split yielded no example'
                      % (config.dataset_dir, split.split_name))
  scores, truth, unscored, not_read = _scored(config, split, arrays)
  metrics = classification_metrics(scores, truth, setup.num_classes)
  logging.info('%s/%s, checkpoint %s (step %d): Accuracy %s, Recall@5 %s',
               config.dataset_name, config.dataset_split_name, checkpoint, plan.global_step,
               accuracy_text(metrics.top1_correct, metrics.num_examples),
               accuracy_text(metrics.top5_correct, metrics.num_examples))
  return EvalResult(metrics.top1, metrics.top5, metrics.num_examples, plan.global_step,
                    checkpoint, metrics, plan.moving_averages, unscored, not_read)


def _run_batches(sess, fetches, progress, max_num_batches, split):
  """Runs (logits, labels, where, damage) to the end of the data; a
  damaged record shard raises DamagedShards (one line, the command that rebuilds it).

  Returns:
    [logits float32 [N, C], labels [N], where [N], damage [N]], or None when the data
    held no example.
  """
  parts = []
  while max_num_batches is None or len(parts) < max_num_batches:
    try:
      with damaged_shards.naming_damaged_shards(split.file_pattern):
        parts.append(sess.run(fetches))
    except tf.errors.OutOfRangeError:
      break
    progress.add(len(parts[-1][1]))
  progress.finish()
  if not parts:
    return None
  return [np.concatenate([part[i] for part in parts]) for i in range(len(parts[0]))]


def _scored(config, split, arrays):
  """-> (logits, labels int64 of the scored images, (('record N of <shard>', reason)),
  images listed but not read)."""
  logits, labels, where, damage = arrays
  bad = damage != b''
  unscored = tuple((item.decode('utf-8'), reason.decode('utf-8'))
                   for item, reason in zip(where[bad], damage[bad]))
  not_read = max(0, split.num_samples - len(labels)) if config.max_num_batches is None else 0
  if unscored or not_read:
    logging.warning('%d of the %d images listed could not be scored: %s%s',
                    len(unscored) + not_read, split.num_samples,
                    '; '.join('%s: %s' % item for item in unscored[:5]),
                    '; %d not in the records' % not_read if not_read else '')
  if not np.any(~bad):
    raise DataError('--dataset_dir=%s: none of the %d images read could be scored, e.g. %s: '
                    '%s' % (config.dataset_dir, len(labels), *unscored[0]))
  return logits[~bad], labels[~bad].astype(np.int64), unscored, not_read
