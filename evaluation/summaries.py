"""What an evaluation shows in TensorBoard, for image and video datasets alike.

Written by `write_summaries` under --eval_dir at the checkpoint's global step, per stream
s ('image' for an image dataset; 'rgb', 'flow', 'fusion' for videos):

  eval/s/top1, eval/s/top5         share of examples whose label is the best (among the
                                   5 best) scored classes: the counts below over examples
  eval/s/top1_correct, top5_correct, examples
                                   those counts, and the examples scored
  eval/s/mean_class_accuracy       mean of the per-class accuracies (classes with examples)
  eval/s/confusion_matrix          the confusion matrix image (evaluation.confusion_plot)
  per_class_accuracy/s/<class>     top-1 accuracy of the examples of one class; a class
                                   without examples in the split gets no value

Class names become tag components: characters other than letters, digits, `_`, `-` and
`.` turn into `_`; names that are empty or collide after that get `class_<label>` or a
`_<label>` suffix. Per-class tags sit in their own top-level group so that TensorBoard's
`eval` group keeps only the few headline numbers. The confusion matrix is also saved as
`confusion-<run>-<s>.png` in --eval_dir (run: the checkpoint's step, as the JSON report's
name).
"""

import collections
import os
import re

from evaluation.confusion_plot import confusion_png
from tf_compat import tf

__all__ = ['StreamMetrics', 'class_tags', 'write_summaries', 'confusion_path']

_NOT_IN_TAG = re.compile(r'[^\w.\-]')

StreamMetrics = collections.namedtuple('StreamMetrics', ['name', 'metrics', 'unit'])
StreamMetrics.__doc__ = """One stream's figures: its name ('image', 'rgb', ...), its
evaluation.metrics.ClassificationMetrics and what it counts ('images' or 'videos')."""


def class_tags(class_names):
  """One tag component per class (label order): sanitised, unique, never empty."""
  tags = [_NOT_IN_TAG.sub('_', name) or 'class_%d' % label
          for label, name in enumerate(class_names)]
  counts = collections.Counter(tags)
  return [tag if counts[tag] == 1 else '%s_%d' % (tag, label)
          for label, tag in enumerate(tags)]


def confusion_path(eval_dir, run, stream_name):
  return os.path.join(eval_dir, 'confusion-%s-%s.png' % (run, stream_name))


def _title(stream, step):
  metrics = stream.metrics
  return '%s, step %d: top-1 %.1f%% (%d/%d %s), mean class %.1f%%' % (
      stream.name, step, 100 * metrics.top1, metrics.top1_correct, metrics.num_examples,
      stream.unit, 100 * metrics.mean_class_accuracy)


def _scalars(stream, tags):
  metrics = stream.metrics
  values = [tf.Summary.Value(tag='eval/%s/%s' % (stream.name, name),
                             simple_value=getattr(metrics, name))
            for name in ('top1', 'top5', 'mean_class_accuracy', 'top1_correct',
                         'top5_correct')]
  values.append(tf.Summary.Value(tag='eval/%s/examples' % stream.name,
                                 simple_value=metrics.num_examples))
  values += [tf.Summary.Value(tag='per_class_accuracy/%s/%s' % (stream.name, tag),
                              simple_value=accuracy)
             for tag, count, accuracy in zip(tags, metrics.class_counts,
                                             metrics.per_class_accuracy) if count]
  return values


def _write_file(path, data):
  temporary = path + '.tmp'
  with open(temporary, 'wb') as handle:
    handle.write(data)
  os.replace(temporary, path)


def write_summaries(eval_dir, step, streams, class_names, run, extra_scalars=None):
  """Writes one event with every stream's summaries, and each confusion PNG.

  Args:
    eval_dir: the directory (created if missing).
    step: the global step the event is written at.
    streams: StreamMetrics, in display order.
    class_names: the model's class names, label order.
    run: names the PNG files (`confusion_path`).
    extra_scalars: {tag: value} written beside (image eval: slim's `eval/Accuracy`).
  Returns:
    The PNG paths, one per stream.
  """
  os.makedirs(eval_dir, exist_ok=True)
  tags = class_tags(class_names)
  values = [tf.Summary.Value(tag=tag, simple_value=value)
            for tag, value in sorted((extra_scalars or {}).items())]
  paths = []
  for stream in streams:
    values += _scalars(stream, tags)
    png, height, width = confusion_png(stream.metrics.confusion, class_names,
                                       _title(stream, step))
    values.append(tf.Summary.Value(
        tag='eval/%s/confusion_matrix' % stream.name, image=tf.Summary.Image(
            height=height, width=width, colorspace=4, encoded_image_string=png)))
    paths.append(confusion_path(eval_dir, run, stream.name))
    _write_file(paths[-1], png)
  writer = tf.summary.FileWriter(eval_dir)
  writer.add_summary(tf.Summary(value=values), step)
  writer.close()
  return paths
