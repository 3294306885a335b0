"""The one evaluation loop: a stream's split through the model, batch by batch, for
images and videos alike.

    plan, arrays = score_split(setup, stream, checkpoint, logits_fn)
    logits, labels, ids, unscored, not_read = scored(setup, stream, arrays)

The pipeline is the registered input's evaluation mode (`input_factory.get_input(kind)
.eval_dataset`: every example once, in order, what does not decode reported in the
batches); the checkpoint is restored by `checkpoints.restore.restore_inference`, the one
restore of eval and export; progress lines come from `evaluation.split_progress`. What
differs by kind is `logits_fn` (a clip's logits are averaged over its clips) and the scoring the
caller does with the arrays (`image_eval`, `video_eval`).
"""

from absl import logging
import numpy as np

from checkpoints import restore
from core.errors import DataError
from core.params import ConfigError
from datasets.formats import damaged_shards
from datasets.inputs import input_factory
from deployment.session.session_config import session_config_for
from evaluation.split_progress import SplitProgress, expected_examples
from resolve.network import build_network
from tf_compat import tf

__all__ = ['score_split', 'scored']


def _network_fn(setup):
  """The network in inference mode (batch norm's moving statistics), in --mixed_precision."""
  return build_network(setup.network)


def _progress(setup, stream, unit):
  total = expected_examples(stream.split.num_samples, setup.batch_size,
                            setup.config.max_num_batches)
  return SplitProgress(stream.name, total, unit, setup.batch_size,
                       setup.config.log_every_n_batches)


def _fit(setup, stream):
  """What the checkpoint must match, and the flags a mismatch names."""
  offset = setup.config.labels_offset
  return restore.ModelFit(
      model_name=setup.config.model_name, num_classes=setup.num_classes,
      channels=stream.split.num_channels,
      data_flag=stream.data_flag + (' with --labels_offset=%d' % offset if offset else ''))


def score_split(setup, stream, checkpoint, logits_fn):
  """Runs the model of `stream` (restored from `checkpoint`) over its split.

  Args:
    setup: the checked EvalSetup; stream: one of setup.streams.
    logits_fn: (network_fn, inputs of one batch) -> logits float32 [batch, C].

  Returns:
    (RestorePlan, [logits [N, C], labels [N], ids [N], damage [N]]): ids name each
    example ('record N of <shard>' for an image, the video id), damage is '' or why it
    could not be used.
  Raises:
    ConfigError: the checkpoint does not fit the model and records or cannot be read,
      or the split yields nothing.
    DataError: a damaged record shard (DamagedShards).
  """
  pipeline = input_factory.get_input(setup.kind)
  with tf.Graph().as_default():
    with tf.device('/device:CPU:0'):
      dataset = pipeline.eval_dataset(stream.split, setup.input_settings)
      inputs, labels, ids, damage = tf.data.make_one_shot_iterator(dataset).get_next()
    fetches = [logits_fn(_network_fn(setup), inputs), labels, ids, damage]
    with tf.Session(setup.config.master, config=session_config_for(setup.config)) as sess:
      plan = restore.restore_inference(sess, checkpoint, _fit(setup, stream),
                                       setup.use_moving_averages, stream.checkpoint_flag)
      arrays = _run_batches(sess, fetches, _progress(setup, stream, pipeline.unit),
                            setup.config.max_num_batches, stream.split)
  if arrays is None:
    raise ConfigError('--%s: the %s split yielded no %s' % (
        stream.data_flag, stream.split.split_name, pipeline.unit[:-1]))
  return plan, arrays


def _run_batches(sess, fetches, progress, max_num_batches, split):
  """Runs `fetches` (logits, labels, ids, damage) to the end of the data (or
  max_num_batches); concatenated arrays, or None when the data held no example. A damaged
  record shard raises DamagedShards (one line, the command that rebuilds it)."""
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
  return [np.concatenate([part[i] for part in parts]) for i in range(len(fetches))]


def scored(setup, stream, arrays):
  """The examples of `arrays` (score_split's) that could be scored.

  Returns:
    (logits [n, C], labels int64 [n], ids str [n] of the examples scored, unscored: ((id,
    reason), ...) those read but not scored, not_read: examples dataset_info.json lists
    that the records did not hold; 0 with --max_num_batches, which reads fewer on purpose).
  Raises:
    DataError: none of the examples read could be scored.
  """
  unit = input_factory.get_input(setup.kind).unit
  logits, labels, ids, damage = arrays
  ids = np.array([item.decode('utf-8') for item in ids])
  bad = damage != b''
  unscored = tuple((item, reason.decode('utf-8'))
                   for item, reason in zip(ids[bad], damage[bad]))
  listed = stream.split.num_samples
  not_read = max(0, listed - len(ids)) if setup.config.max_num_batches is None else 0
  if unscored or not_read:
    logging.warning('%s: %d of the %d %s listed could not be scored: %s%s', stream.name,
                    len(unscored) + not_read, listed, unit,
                    '; '.join('%s: %s' % item for item in unscored[:5]),
                    '; %d not in the records (checked by: python -m datasets.verify_records '
                    '--dataset_dir=%s)' % (not_read, stream.split.dataset_dir)
                    if not_read else '')
  if not np.any(~bad):
    raise DataError('--%s: none of the %d %s read could be scored, e.g. %s: %s'
                    % (stream.data_flag, len(ids), unit, *unscored[0]))
  return logits[~bad], labels[~bad].astype(np.int64), ids[~bad], unscored, not_read
