"""What eval.py does: check the config, then evaluate one checkpoint or watch for new ones.

    config, settings = from_run_records(config, given)   # the run's record, if any
    for result in evaluations(config, settings):
      print(summary(result))

Image datasets go to `evaluation.image_eval` (slim's Accuracy and Recall@5, and the
per-class figures), video datasets to `evaluation.video_eval`. With --eval_dir both
write the same TensorBoard summaries and confusion matrix PNGs (`evaluation.summaries`)
and a JSON report (`evaluation.report`) there. Every accuracy shown is a count over the
examples scored (`evaluation.metrics.accuracy_text`), and --min_accuracy compares counts.
After each evaluation `evaluation.alerts` warns of unsettled batch-norm statistics and
of one class taking 90 % of the predictions.
"""

import dataclasses

from absl import logging

from evaluation import alerts, report, summaries
from evaluation.image_eval import evaluate as evaluate_images
from evaluation.metrics import accuracy_text, reaches
from evaluation.setup import check_eval_config
from evaluation.video_eval import evaluate_videos
from checkpoints.watch import watch_checkpoints
from resolve import names
from tf_compat import tf
from core import errors
from core.params import ConfigError

__all__ = ['Run', 'VideoRun', 'ImageRun', 'evaluations', 'evaluate_checkpoint', 'summary',
           'exit_status']


@dataclasses.dataclass(frozen=True)
class Run:
  """One evaluation: its result (image_eval.EvalResult or VideoEvalResult), the setup it
  ran with, its report and its confusion matrix PNGs (None and () without --eval_dir)."""
  result: object
  setup: object
  report_path: object
  confusion_paths: tuple = ()

  @property
  def accuracy(self):
    return self.result.accuracy

  @property
  def metrics(self):
    """The ClassificationMetrics the accuracy is counted in."""
    return self.metrics_by_stream[-1][1]


class VideoRun(Run):
  """A video evaluation (summary prints its table)."""

  unit = 'videos'

  @property
  def num_unscored(self):
    return self.result.primary.num_unscored

  @property
  def metrics_by_stream(self):
    return [(s.name, self.result.metrics[s.name]) for s in self.result.streams]

  @property
  def evaluated(self):
    """(stream, checkpoint, global step) of each checkpoint scored."""
    return [(stream, scores.checkpoint, scores.global_step)
            for stream, scores in zip(self.setup.streams, self.result.streams)]


class ImageRun(Run):
  """An image evaluation (summary prints slim's line)."""

  unit = 'images'

  @property
  def num_unscored(self):
    return len(self.result.unscored) + self.result.not_read

  @property
  def metrics_by_stream(self):
    return [('image', self.result.metrics)]

  @property
  def evaluated(self):
    return [(self.setup.streams[0], self.result.checkpoint, self.result.global_step)]


def _evaluate_images(setup, checkpoints):
  config = setup.config
  result = evaluate_images(setup, checkpoints[0])
  if not config.eval_dir:
    return ImageRun(result, setup, None)
  figures = summaries.write_summaries(
      config.eval_dir, result.global_step,
      [summaries.StreamMetrics('image', result.metrics, 'images')],
      report.class_names(setup), report.run_name(result),
      extra_scalars={'eval/Accuracy': result.accuracy, 'eval/Recall_5': result.recall_at_5,
                     'eval/unscored_images': len(result.unscored) + result.not_read})
  path = report.write_image_report(config.eval_dir, setup, result)
  return ImageRun(result, setup, path, tuple(figures))


def _evaluate_videos(setup, checkpoints):
  config = setup.config
  result = evaluate_videos(setup, checkpoints)
  if not config.eval_dir:
    return VideoRun(result, setup, None)
  figures = summaries.write_summaries(
      config.eval_dir, result.global_step,
      [summaries.StreamMetrics(s.name, result.metrics[s.name], 'videos')
       for s in result.streams],
      report.class_names(setup), report.run_name(result),
      extra_scalars={'eval/unscored_videos': result.primary.num_unscored})
  path = report.write_report(config.eval_dir, setup, result)
  return VideoRun(result, setup, path, tuple(figures))


# One evaluation per kind of data (the resolver's names.IMAGE, names.VIDEO).
_EVALUATIONS = {names.IMAGE: _evaluate_images, names.VIDEO: _evaluate_videos}


def evaluate_checkpoint(setup, checkpoints):
  """Evaluates one checkpoint per stream (images: one); a VideoRun or an ImageRun, after
  logging its warnings (evaluation.alerts)."""
  run = _EVALUATIONS[setup.kind](setup, checkpoints)
  names = report.class_names(setup)
  alerts.warn([(stream.settings.record, setup.config.model_name, checkpoint, step)
               for stream, checkpoint, step in run.evaluated],
              [(name, metrics, names) for name, metrics in run.metrics_by_stream])
  return run


def _watched(setup):
  """Evaluations of each new checkpoint of the --checkpoint_path directory."""
  config = setup.config
  for checkpoint in watch_checkpoints(config.checkpoint_path, config.max_number_of_steps,
                                      config.watch_timeout, config.watch_poll_secs):
    try:
      yield evaluate_checkpoint(setup, [checkpoint])
    except ConfigError:
      if tf.io.gfile.exists(checkpoint + '.index'):
        raise
      logging.warning('%s was deleted by the trainer while being evaluated; skipped',
                      checkpoint)


def evaluations(config, settings=None):
  """Yields one result per evaluated checkpoint: the given one, or each new one (--watch).
  settings: from_run_records' (None: no run record).

  Raises:
    ConfigError: a user mistake, found before any graph is built (or, for a checkpoint
      that does not fit the model, before its session runs).
  """
  setup = check_eval_config(config, settings)
  if config.watch:
    yield from _watched(setup)
  else:
    yield evaluate_checkpoint(setup, [s.checkpoint for s in setup.streams])


def summary(result):
  """Text for the user: a metrics table (videos) or slim's one line (images), then where
  the report and the confusion matrices went."""
  if isinstance(result, VideoRun):
    lines = [report.format_table(result.setup, result.result)]
  else:
    image = result.result
    metrics = image.metrics
    lines = ['Accuracy: %s  Recall@5: %s  (%d examples, step %d)' % (
        accuracy_text(metrics.top1_correct, metrics.num_examples),
        accuracy_text(metrics.top5_correct, metrics.num_examples), metrics.num_examples,
        image.global_step)]
    lines += report.unscored_lines('image', image.unscored, image.not_read, 'images')
  if result.report_path:
    lines.append('report: %s' % result.report_path)
  lines += ['confusion matrix: %s' % path for path in result.confusion_paths]
  return '\n'.join(lines)


def exit_status(config, results):
  """OK; BELOW_TARGET (after one error line) when nothing was evaluated or accuracy is
  too low; else INCOMPLETE (after one error line) when the last evaluation could not score
  every video or image of the split (core/errors.py's table)."""
  if not results:
    errors.print_error('--watch: no checkpoint appeared in --checkpoint_path=%s within '
                       '--watch_timeout=%g s' % (config.checkpoint_path, config.watch_timeout))
    return errors.BELOW_TARGET
  metrics = results[-1].metrics
  if config.min_accuracy is not None and not reaches(
      metrics.top1_correct, metrics.num_examples, config.min_accuracy):
    errors.print_error('accuracy %s is below --min_accuracy=%s' % (
        accuracy_text(metrics.top1_correct, metrics.num_examples), config.min_accuracy))
    return errors.BELOW_TARGET
  if results[-1].num_unscored:
    last = results[-1]
    errors.print_error('%d %s of %s/%s could not be scored (listed above and in the report); '
                       'the figures are over the rest' % (
                           last.num_unscored, last.unit, config.dataset_name,
                           config.dataset_split_name))
    return errors.INCOMPLETE
  return errors.OK
