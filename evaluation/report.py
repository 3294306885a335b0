"""What a video evaluation leaves behind: a table, TensorBoard summaries, a JSON report.

Summaries (at the checkpoint's global step) under --eval_dir, per stream s (rgb, flow,
fusion): scalars `eval/s/top1`, `eval/s/top5`, `eval/s/mean_class_accuracy`, and the
image `eval/s/confusion_matrix` (rows true class, columns predicted, each row scaled by
its class's videos: white 0, dark blue all).

The JSON report `report-<N>.json` for checkpoint model.ckpt-N
(`report-<rgb N>-flow-<flow N>.json` for a fusion) beside them:

    {"dataset": {"name", "split", "num_videos", "dirs": {stream: dir}},
     "model": {"name", "num_classes", "net_kwargs"},
     "sampling": {"mode": "eval_clips", "clips", "clip_frames", "crop_size"}
                 | {"mode": "eval_frames", "frames", "crop_size"},
     "primary": "rgb" | "flow" | "fusion", "global_step": <primary's step>,
     "streams": {stream: {"checkpoint", "global_step", "moving_averages",
                          "metrics": {"top1", "top5", "mean_class_accuracy", "num_videos"},
                          "per_class": [{"label", "name", "videos", "accuracy"}],
                          "confusion_matrix": [[count]]}},
     "videos": [{"id", "label", "prediction", "probability"}]}   (primary stream)
"""

import io
import json
import math
import os

import numpy as np
from PIL import Image

from evaluation.setup import network_kwargs
from checkpoints.paths import checkpoint_step
from tf_compat import tf

__all__ = ['report_dict', 'report_path', 'write_report', 'write_summaries',
           'confusion_image', 'format_table']

_MAX_IMAGE_SIDE = 512
_FULL = np.array([8, 48, 107], np.float64)   # colour of a row's whole mass


def confusion_image(confusion):
  """uint8 [C * s, C * s, 3]: row-normalised counts, s pixels per cell (s <= 16)."""
  counts = np.asarray(confusion, np.float64)
  share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
  colour = 255.0 + share[..., None] * (_FULL - 255.0)
  cell = max(1, min(16, _MAX_IMAGE_SIDE // len(counts)))
  pixels = np.repeat(np.repeat(colour, cell, axis=0), cell, axis=1)
  return np.round(pixels).astype(np.uint8)


def _png(image):
  buffer = io.BytesIO()
  Image.fromarray(image).save(buffer, format='PNG')
  return buffer.getvalue()


def write_summaries(eval_dir, result):
  """Scalars and the confusion image of every stream, at the primary global step."""
  values = []
  for stream in result.streams:
    metrics = result.metrics[stream.name]
    for name in ('top1', 'top5', 'mean_class_accuracy'):
      values.append(tf.Summary.Value(tag='eval/%s/%s' % (stream.name, name),
                                     simple_value=getattr(metrics, name)))
    image = confusion_image(metrics.confusion)
    values.append(tf.Summary.Value(tag='eval/%s/confusion_matrix' % stream.name,
                                   image=tf.Summary.Image(
                                       height=image.shape[0], width=image.shape[1],
                                       colorspace=3, encoded_image_string=_png(image))))
  os.makedirs(eval_dir, exist_ok=True)
  writer = tf.summary.FileWriter(eval_dir)
  writer.add_summary(tf.Summary(value=values), result.global_step)
  writer.close()


def _number(value):
  return None if value is None or math.isnan(value) else float(value)


def _stream_dict(stream, metrics, labels_to_names, labels_offset):
  return {
      'checkpoint': stream.checkpoint or None, 'global_step': stream.global_step,
      'moving_averages': stream.moving_averages,
      'metrics': {'top1': metrics.top1, 'top5': metrics.top5,
                  'mean_class_accuracy': metrics.mean_class_accuracy,
                  'num_videos': metrics.num_examples},
      'per_class': [{'label': label, 'name': labels_to_names.get(label + labels_offset, ''),
                     'videos': int(count), 'accuracy': _number(accuracy)}
                    for label, (count, accuracy) in enumerate(
                        zip(metrics.class_counts, metrics.per_class_accuracy))],
      'confusion_matrix': metrics.confusion.tolist()}


def _videos(stream):
  probabilities = stream.probabilities()
  predictions = np.argmax(stream.logits, axis=1)
  return [{'id': str(video_id), 'label': int(label), 'prediction': int(prediction),
           'probability': float(row[prediction])}
          for video_id, label, prediction, row in zip(
              stream.video_ids, stream.labels, predictions, probabilities)]


def report_dict(config, setup, result):
  """The JSON report (layout in the module docstring) as a dict."""
  split = setup.streams[0].split
  dirs = {stream.name: stream.split.dataset_dir for stream in setup.streams}
  return {
      'dataset': {'name': config.dataset_name, 'split': config.dataset_split_name,
                  'num_videos': result.metrics[result.primary.name].num_examples,
                  'dirs': dirs},
      'model': {'name': config.model_name, 'num_classes': setup.num_classes,
                'net_kwargs': network_kwargs(config)},
      'sampling': setup.sampling.as_dict(),
      'primary': result.primary.name, 'global_step': result.global_step,
      'streams': {stream.name: _stream_dict(stream, result.metrics[stream.name],
                                            split.labels_to_names, config.labels_offset)
                  for stream in result.streams},
      'videos': _videos(result.primary)}


def _name_step(stream):
  """The step in the checkpoint's name (model.ckpt-N); its stored global_step otherwise.

  Names, not stored steps, keep reports apart: slim's Supervisor names a checkpoint before
  it reads the variables, so model.ckpt-0 can hold global_step 1, like model.ckpt-1.
  """
  step = checkpoint_step(stream.checkpoint)
  return stream.global_step if step is None else step


def report_path(eval_dir, result):
  streams = {s.name: s for s in result.streams}
  if 'fusion' in streams:
    return os.path.join(eval_dir, 'report-%d-flow-%d.json' % (
        _name_step(streams['rgb']), _name_step(streams['flow'])))
  return os.path.join(eval_dir, 'report-%d.json' % _name_step(result.primary))


def write_report(eval_dir, config, setup, result):
  """Writes the JSON report into eval_dir (atomically); returns its path."""
  os.makedirs(eval_dir, exist_ok=True)
  path = report_path(eval_dir, result)
  temporary = path + '.tmp'
  with open(temporary, 'w') as handle:
    json.dump(report_dict(config, setup, result), handle, indent=1)
    handle.write('\n')
  os.replace(temporary, path)
  return path


def format_table(config, setup, result):
  """A few lines: what was evaluated, then one row of metrics per stream."""
  lines = ['%s/%s: %d videos, %s' % (
      config.dataset_name, config.dataset_split_name,
      result.metrics[result.primary.name].num_examples, setup.sampling.describe()),
           '%-7s %7s %7s %11s  %s' % ('stream', 'top-1', 'top-5', 'mean class',
                                      'checkpoint (step)')]
  for stream in result.streams:
    metrics = result.metrics[stream.name]
    source = ('%s (%d%s)' % (stream.checkpoint, stream.global_step,
                             ', averaged' if stream.moving_averages else '')
              if stream.checkpoint else 'rgb + flow logits')
    lines.append('%-7s %6.2f%% %6.2f%% %10.2f%%  %s' % (
        stream.name, 100 * metrics.top1, 100 * metrics.top5,
        100 * metrics.mean_class_accuracy, source))
  return '\n'.join(lines)
