"""What an evaluation leaves behind: a table, and a JSON report beside the summaries.

The TensorBoard summaries and the confusion matrix PNGs are `evaluation.summaries`'.

The JSON report `report-<N>.json` for checkpoint model.ckpt-N
(`report-<rgb N>-flow-<flow N>.json` for a fusion) under --eval_dir. For videos:

    {"dataset": {"name", "split", "num_videos", "unscored_videos", "dirs": {stream: dir}},
     "model": {"name", "num_classes", "net_kwargs"},
     "sampling": {"mode": "eval_clips", "clips", "clip_frames", "crop_size"}
                 | {"mode": "eval_frames", "frames", "crop_size"},
     "settings": {stream: {"record": the run's flags.cfg or null,
                           setting: {"value", "from": "record" | "flag" | "default",
                                     "recorded_as": training flag (from the record)}}},
     "primary": "rgb" | "flow" | "fusion", "global_step": <primary's step>,
     "streams": {stream: {"checkpoint", "global_step", "moving_averages",
                          "metrics": {"top1", "top5", "mean_class_accuracy", "num_videos",
                                      "top1_correct", "top5_correct"},
                          "per_class": [{"label", "name", "videos", "accuracy"}],
                          "confusion_matrix": [[count]],
                          "unscored": {"count", "not_read", "videos": [{"id", "reason"}]}}},
     "videos": [{"id", "label", "prediction", "probability"}]}   (primary stream)

"num_videos" counts the videos scored; "unscored_videos" (the primary stream's
"unscored" "count") those of the split that were not; "top1" is "top1_correct" /
"num_videos" (accuracies are counts first). The unscored: read but a frame their clips need
does not decode (listed with the reason), or listed in dataset_info.json but not in the
records ("not_read": a shard, or a video shard's index, cut at a record boundary). The
metrics are over the scored.

For images the same, counted in images, with the preprocessing in place of the sampling,
slim's two figures beside the others and no per-example list (image records carry no id):

    {"dataset": {"name", "split", "num_images", "unscored_images", "dirs": {"image": dir}},
     "model": {...}, "preprocessing": {"name", "image_size"}, "settings": {"image": ...},
     "primary": "image", "global_step",
     "streams": {"image": {"checkpoint", "global_step", "moving_averages",
                           "metrics": {"top1", "top5", "mean_class_accuracy", "num_images",
                                       "top1_correct", "top5_correct", "accuracy",
                                       "recall_at_5"},
                           "per_class": [{"label", "name", "images", "accuracy"}],
                           "confusion_matrix": [[count]],
                           "unscored": {"count", "not_read",
                                        "images": [{"id": "record N of <shard>", "reason"}]}}}}

A class without examples in the split has accuracy null.
"""

import json
import math
import os

import numpy as np

from checkpoints.paths import checkpoint_step

__all__ = ['class_names', 'report_dict', 'image_report_dict', 'run_name', 'report_path',
           'write_report', 'write_image_report', 'format_table', 'unscored_lines']


def class_names(setup):
  """The model's class names in label order ('' where labels.txt has none)."""
  names = setup.streams[0].split.labels_to_names
  offset = setup.config.labels_offset
  return [names.get(label + offset, '') for label in range(setup.num_classes)]


def _number(value):
  return None if value is None or math.isnan(value) else float(value)


def _unscored(stream, unit):
  """What `stream` (StreamScores or image_eval.EvalResult) could not score."""
  return {'count': len(stream.unscored) + stream.not_read, 'not_read': stream.not_read,
          unit: [{'id': item, 'reason': reason} for item, reason in stream.unscored]}


def _stream_dict(stream, metrics, names, unit):
  """stream: what was evaluated (.checkpoint, .global_step, .moving_averages, .unscored,
  .not_read)."""
  return {
      'checkpoint': stream.checkpoint or None, 'global_step': stream.global_step,
      'moving_averages': stream.moving_averages,
      'metrics': {'top1': metrics.top1, 'top5': metrics.top5,
                  'mean_class_accuracy': metrics.mean_class_accuracy,
                  'num_' + unit: metrics.num_examples, 'top1_correct': metrics.top1_correct,
                  'top5_correct': metrics.top5_correct},
      'per_class': [{'label': label, 'name': name, unit: int(count),
                     'accuracy': _number(accuracy)}
                    for label, (name, count, accuracy) in enumerate(
                        zip(names, metrics.class_counts, metrics.per_class_accuracy))],
      'confusion_matrix': metrics.confusion.tolist(),
      'unscored': _unscored(stream, unit)}


def _videos(stream):
  probabilities = stream.probabilities()
  predictions = np.argmax(stream.logits, axis=1)
  return [{'id': str(video_id), 'label': int(label), 'prediction': int(prediction),
           'probability': float(row[prediction])}
          for video_id, label, prediction, row in zip(
              stream.video_ids, stream.labels, predictions, probabilities)]


def _model(setup):
  return {'name': setup.config.model_name, 'num_classes': setup.num_classes,
          'net_kwargs': dict(setup.network.net_kwargs)}


def _settings(setup):
  return {stream.name: stream.settings.as_dict() for stream in setup.streams}


def report_dict(setup, result):
  """The JSON report of a video evaluation (VideoEvalResult) as a dict."""
  config, names = setup.config, class_names(setup)
  dirs = {stream.name: stream.split.dataset_dir for stream in setup.streams}
  return {
      'dataset': {'name': config.dataset_name, 'split': config.dataset_split_name,
                  'num_videos': result.metrics[result.primary.name].num_examples,
                  'unscored_videos': result.primary.num_unscored, 'dirs': dirs},
      'model': _model(setup),
      'sampling': setup.sampling.to_json(), 'settings': _settings(setup),
      'primary': result.primary.name, 'global_step': result.global_step,
      'streams': {stream.name: _stream_dict(stream, result.metrics[stream.name], names,
                                            'videos')
                  for stream in result.streams},
      'videos': _videos(result.primary)}


def image_report_dict(setup, result):
  """The JSON report of an image evaluation (image_eval.EvalResult) as a dict."""
  config, settings = setup.config, setup.input_settings
  stream = _stream_dict(result, result.metrics, class_names(setup), 'images')
  stream['metrics'].update(accuracy=result.accuracy, recall_at_5=result.recall_at_5)
  return {
      'dataset': {'name': config.dataset_name, 'split': config.dataset_split_name,
                  'num_images': result.metrics.num_examples,
                  'unscored_images': len(result.unscored) + result.not_read,
                  'dirs': {'image': setup.streams[0].split.dataset_dir}},
      'model': _model(setup),
      'preprocessing': {'name': settings.preprocessing_name,
                        'image_size': settings.image_size},
      'settings': _settings(setup),
      'primary': 'image', 'global_step': result.global_step,
      'streams': {'image': stream}}


def _name_step(evaluated):
  """The step in the checkpoint's name (model.ckpt-N); its stored global_step otherwise.

  Names, not stored steps, keep reports apart: slim's Supervisor names a checkpoint before
  it reads the variables, so model.ckpt-0 can hold global_step 1, like model.ckpt-1.
  """
  step = checkpoint_step(evaluated.checkpoint)
  return evaluated.global_step if step is None else step


def run_name(result):
  """What names a run's files: '<N>' for checkpoint model.ckpt-N, '<rgb N>-flow-<flow N>'
  for a fusion. result: a VideoEvalResult or an image_eval.EvalResult."""
  streams = {s.name: s for s in getattr(result, 'streams', ())}
  if 'fusion' in streams:
    return '%d-flow-%d' % (_name_step(streams['rgb']), _name_step(streams['flow']))
  return '%d' % _name_step(getattr(result, 'primary', result))


def report_path(eval_dir, result):
  return os.path.join(eval_dir, 'report-%s.json' % run_name(result))


def _write_json(path, content):
  os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
  temporary = path + '.tmp'
  with open(temporary, 'w') as handle:
    json.dump(content, handle, indent=1)
    handle.write('\n')
  os.replace(temporary, path)
  return path


def write_report(eval_dir, setup, result):
  """Writes a video evaluation's JSON report into eval_dir (atomically); returns its path."""
  return _write_json(report_path(eval_dir, result), report_dict(setup, result))


def write_image_report(eval_dir, setup, result):
  """Writes an image evaluation's JSON report into eval_dir (atomically); its path."""
  return _write_json(report_path(eval_dir, result), image_report_dict(setup, result))


def unscored_lines(name, unscored, not_read, unit, shown=5):
  """Lines saying what one evaluation could not score ([] when it scored everything)."""
  count = len(unscored) + not_read
  if not count:
    return []
  lines = ['%s: %d %s not scored (not in the metrics):' % (name, count, unit)]
  lines += ['  %s: %s' % item for item in unscored[:shown]]
  if len(unscored) > shown:
    lines.append('  ... %d more in the report' % (len(unscored) - shown))
  if not_read:
    lines.append('  %d listed in dataset_info.json but not in the records (a shard or its '
                 'index cut at a record boundary?); python -m datasets.verify_records checks '
                 'them' % not_read)
  return lines


def _percent(correct, total):
  """'95.00% (342/360)'."""
  return '%.2f%% (%d/%d)' % (100 * correct / total, correct, total)


def format_table(setup, result):
  """A few lines: what was evaluated, one row of metrics per stream, then the videos that
  could not be scored, if any."""
  config, primary = setup.config, result.primary
  scored = result.metrics[primary.name].num_examples
  counted = ('%d videos' % scored if not primary.num_unscored else
             '%d of %d videos scored' % (scored, scored + primary.num_unscored))
  lines = ['%s/%s: %s, %s' % (config.dataset_name, config.dataset_split_name, counted,
                              setup.sampling.describe()),
           '%-7s %17s %17s %11s  %s' % ('stream', 'top-1', 'top-5', 'mean class',
                                        'checkpoint (step)')]
  for stream in result.streams:
    metrics = result.metrics[stream.name]
    source = ('%s (%d%s)' % (stream.checkpoint, stream.global_step,
                             ', averaged' if stream.moving_averages else '')
              if stream.checkpoint else 'rgb + flow logits')
    lines.append('%-7s %17s %17s %10.2f%%  %s' % (
        stream.name, _percent(metrics.top1_correct, metrics.num_examples),
        _percent(metrics.top5_correct, metrics.num_examples),
        100 * metrics.mean_class_accuracy, source))
  lines += unscored_lines(primary.name, primary.unscored, primary.not_read, 'videos')
  return '\n'.join(lines)
