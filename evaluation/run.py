"""What eval.py does: check the config, then evaluate one checkpoint or watch for new ones.

    for result in evaluations(config):
      print(summary(config, result))

Image datasets go to `evaluation.image_eval` (unchanged slim behaviour), video datasets
to `evaluation.video_eval`, whose results are also written as summaries and a JSON
report under --eval_dir (`evaluation.report`).
"""

import dataclasses

from absl import logging

from evaluation import report
from evaluation.image_eval import evaluate as evaluate_images
from evaluation.setup import check_eval_config
from evaluation.video_eval import evaluate_videos
from checkpoints.watch import watch_checkpoints
from resolve import names
from tf_compat import tf
from core import errors
from core.params import ConfigError

__all__ = ['VideoRun', 'evaluations', 'evaluate_checkpoint', 'summary', 'exit_status']


@dataclasses.dataclass(frozen=True)
class VideoRun:
  """A video evaluation: the VideoEvalResult, the setup it ran with and its report."""
  result: object
  setup: object
  report_path: object    # None without --eval_dir

  @property
  def accuracy(self):
    return self.result.accuracy


def _evaluate_images(config, setup, checkpoints):
  return evaluate_images(config, setup, checkpoints[0])


def _evaluate_videos(config, setup, checkpoints):
  result = evaluate_videos(config, setup, checkpoints)
  path = None
  if config.eval_dir:
    report.write_summaries(config.eval_dir, result)
    path = report.write_report(config.eval_dir, config, setup, result)
  return VideoRun(result, setup, path)


# One evaluation per kind of data (the resolver's names.IMAGE, names.VIDEO).
_EVALUATIONS = {names.IMAGE: _evaluate_images, names.VIDEO: _evaluate_videos}


def evaluate_checkpoint(config, setup, checkpoints):
  """Evaluates one checkpoint per stream (images: one); VideoRun or image EvalResult."""
  return _EVALUATIONS[setup.kind](config, setup, checkpoints)


def _watched(config, setup):
  """Evaluations of each new checkpoint of the --checkpoint_path directory."""
  for checkpoint in watch_checkpoints(config.checkpoint_path, config.max_number_of_steps,
                                      config.watch_timeout, config.watch_poll_secs):
    try:
      yield evaluate_checkpoint(config, setup, [checkpoint])
    except ConfigError:
      if tf.io.gfile.exists(checkpoint + '.index'):
        raise
      logging.warning('%s was deleted by the trainer while being evaluated; skipped',
                      checkpoint)


def evaluations(config):
  """Yields one result per evaluated checkpoint: the given one, or each new one (--watch).

  Raises:
    ConfigError: a user mistake, found before any graph is built (or, for a checkpoint
      that does not fit the model, before its session runs).
  """
  setup = check_eval_config(config)
  if config.watch:
    yield from _watched(config, setup)
  else:
    yield evaluate_checkpoint(config, setup, [s.checkpoint for s in setup.streams])


def summary(config, result):
  """Text for the user: a metrics table (videos) or slim's one line (images)."""
  if isinstance(result, VideoRun):
    text = report.format_table(config, result.setup, result.result)
    if result.report_path:
      text += '\nreport: %s' % result.report_path
    return text
  return 'Accuracy: %.4f  Recall@5: %.4f  (%d examples, step %d)' % (
      result.accuracy, result.recall_at_5, result.num_examples, result.global_step)


def exit_status(config, results):
  """OK, or BELOW_TARGET (after one error line) when nothing was evaluated or accuracy is
  too low (core/errors.py's table)."""
  if not results:
    errors.print_error('--watch: no checkpoint appeared in --checkpoint_path=%s within '
                       '--watch_timeout=%g s' % (config.checkpoint_path, config.watch_timeout))
    return errors.BELOW_TARGET
  accuracy = results[-1].accuracy
  if config.min_accuracy is not None and accuracy < config.min_accuracy:
    errors.print_error('accuracy %.4f is below --min_accuracy=%.4f'
                       % (accuracy, config.min_accuracy))
    return errors.BELOW_TARGET
  return errors.OK
