"""Evaluates an image classifier checkpoint on a whole split: slim's Accuracy and Recall@5,
counted (top-1 and top-5 of `evaluation.metrics`), and the per-class figures of the same
predictions.

Every example of the split is seen exactly once (no dropped remainder), batch norm runs
in inference mode, and with `moving_average_decay` the averaged weights are restored (as
the training run kept them). Variables carry no clone prefix, so a checkpoint trained
with any number of clones or workers evaluates the same on one device. The batches, the
restore and the progress lines are `evaluation.loop`'s, shared with video evaluation.

The logits and labels of every batch are kept (N x C float32: 200 MB for ImageNet's
50,000 x 1,000) for `metrics` (top-1 and top-5 counts, per-class accuracy, confusion
matrix); `accuracy` and `recall_at_5` are its counts over N, not a streaming float32
ratio (which put exactly 342 of 360 below 0.95). Nothing is written here:
`evaluation.run` writes the summaries and the report.
"""

import collections

from absl import logging

from evaluation import loop
from evaluation.config import EvalConfig
from evaluation.metrics import accuracy_text, classification_metrics

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


def _image_logits(network_fn, images):
  """float32 [batch, C]: the network's logits of images [batch, H, W, C]."""
  return network_fn(images)[0]


def evaluate(setup, checkpoint=None):
  """Evaluates `checkpoint` (default: --checkpoint_path's) on the split; returns an
  EvalResult. `setup` is check_eval_config's.

  Raises:
    ConfigError: the checkpoint does not fit the model or cannot be read.
    DataError: a damaged record shard, or no image could be scored.
  """
  config, stream = setup.config, setup.streams[0]
  checkpoint = checkpoint or stream.checkpoint
  plan, arrays = loop.score_split(setup, stream, checkpoint, _image_logits)
  scores, truth, _, unscored, not_read = loop.scored(setup, stream, arrays)
  metrics = classification_metrics(scores, truth, setup.num_classes)
  logging.info('%s/%s, checkpoint %s (step %d): Accuracy %s, Recall@5 %s',
               config.dataset_name, config.dataset_split_name, checkpoint, plan.global_step,
               accuracy_text(metrics.top1_correct, metrics.num_examples),
               accuracy_text(metrics.top5_correct, metrics.num_examples))
  return EvalResult(metrics.top1, metrics.top5, metrics.num_examples, plan.global_step,
                    checkpoint, metrics, plan.moving_averages, unscored, not_read)
