"""Evaluates an image classifier checkpoint on a whole split: Accuracy and Recall@5.

Every example of the split is seen exactly once (no dropped remainder), batch norm runs
in inference mode, and with `moving_average_decay` the averaged weights are restored (as
the training run kept them). Variables carry no clone prefix, so a checkpoint trained
with any number of clones or workers evaluates the same on one device.
"""

import collections
import os

from absl import logging

from checkpoints import restore
from deployment.session_config import session_config_for
from core.params import ConfigError
from datasets.inputs import image_input
from evaluation.config import EvalConfig
from evaluation.setup import check_eval_config
from nets import nets_factory
from tf_compat import tf

__all__ = ['EvalConfig', 'EvalResult', 'evaluate']

EvalResult = collections.namedtuple(
    'EvalResult', ['accuracy', 'recall_at_5', 'num_examples', 'global_step', 'checkpoint'])


def _build_graph(config, setup, split):
  """Returns (update ops, metric values dict, batch size tensor)."""
  spec = nets_factory.get_network_spec(config.model_name)
  image_size = (spec.default_image_size if config.eval_image_size is None
                else config.eval_image_size)
  kwargs = {}
  if config.use_batch_norm is not None:
    kwargs['use_batch_norm'] = config.use_batch_norm
  network_fn = nets_factory.get_network_fn(
      config.model_name, num_classes=split.num_classes - config.labels_offset,
      is_training=False, **kwargs)
  with tf.device('/device:CPU:0'):
    dataset = image_input.build_image_dataset(
        split, batch_size=setup.batch_size, image_size=image_size,
        preprocessing_name=config.preprocessing_name or spec.preprocessing_name,
        is_training=False, num_readers=1,
        num_preprocessing_threads=config.num_preprocessing_threads, num_epochs=1,
        drop_remainder=False, labels_offset=config.labels_offset)
    images, labels = tf.data.make_one_shot_iterator(dataset).get_next()
  logits, _ = network_fn(images)
  predictions = tf.argmax(logits, 1)
  k = min(5, logits.get_shape().as_list()[-1])
  accuracy = tf.metrics.accuracy(labels, predictions)
  recall = tf.metrics.mean(tf.cast(tf.nn.in_top_k(logits, tf.cast(labels, tf.int32), k),
                                   tf.float32))
  updates = [accuracy[1], recall[1]]
  values = {'Accuracy': accuracy[0], 'Recall_5': recall[0]}
  return updates, values, tf.shape(labels)[0]


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


def _write_summaries(eval_dir, metrics, global_step):
  os.makedirs(eval_dir, exist_ok=True)
  writer = tf.summary.FileWriter(eval_dir)
  summary = tf.Summary(value=[tf.Summary.Value(tag='eval/' + name, simple_value=value)
                              for name, value in sorted(metrics.items())])
  writer.add_summary(summary, global_step)
  writer.close()


def evaluate(config, setup=None, checkpoint=None):
  """Evaluates `checkpoint` (default: config.checkpoint_path's) on the split; returns an
  EvalResult. `setup` is check_eval_config's (made here when not given)."""
  setup = setup or check_eval_config(config)
  split = setup.streams[0].split
  checkpoint = checkpoint or setup.streams[0].checkpoint
  with tf.Graph().as_default():
    updates, values, batch = _build_graph(config, setup, split)
    plan = _restore_plan(config, split, checkpoint)
    saver = restore.make_saver(plan)
    with tf.Session(config.master, config=session_config_for(config)) as sess:
      try:
        saver.restore(sess, checkpoint)
      except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as error:
        # The plan checked names and shapes: the files went away or are damaged.
        raise ConfigError('--checkpoint_path=%s could not be read: %s'
                          % (checkpoint, str(error).split('\n')[0])) from None
      sess.run(tf.local_variables_initializer())
      num_examples = _run_batches(sess, updates, batch, config.max_num_batches)
      metrics = sess.run(values)
      step = plan.global_step
  if config.eval_dir:
    _write_summaries(config.eval_dir, metrics, step)
  logging.info('%s/%s, %d examples, checkpoint %s (step %d): Accuracy %.4f, Recall@5 %.4f',
               config.dataset_name, config.dataset_split_name, num_examples, checkpoint,
               step, metrics['Accuracy'], metrics['Recall_5'])
  return EvalResult(float(metrics['Accuracy']), float(metrics['Recall_5']), num_examples,
                    step, checkpoint)


def _run_batches(sess, updates, batch, max_num_batches):
  num_examples, num_batches = 0, 0
  while max_num_batches is None or num_batches < max_num_batches:
    try:
      _, size = sess.run([updates, batch])
    except tf.errors.OutOfRangeError:
      break
    num_examples += int(size)
    num_batches += 1
  return num_examples
