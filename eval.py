r"""Evaluates a checkpoint (a file, or the latest in a directory) on a dataset split.

From a training run's own record (its train_dir's flags.cfg), with nothing else: the
network, its width, the data (and so the modality), the clip frames and the crop it trained:

    python eval.py --checkpoint_path=TRAIN_DIR --dataset_split_name=test --eval_dir=EVAL_DIR

A flag given wins (one log line names those that differ from the run's); a run moved
away from its --dataset_dir needs --dataset_dir. Without a record (an older run, a
checkpoint outside a train_dir) every flag is as given. Warnings (one line each): batch-norm
statistics that cannot have settled, one class taking 90 % of the predictions.

Images (slim's eval_image_classifier; prints Accuracy and Recall@5 with their counts,
`0.9500 (342/360)`; with --eval_dir also the per-class figures, the confusion matrix and a
JSON report, as for videos):

    python eval.py --dataset_name=digits --dataset_dir=DIR --model_name=lenet \
        --checkpoint_path=TRAIN_DIR --eval_dir=EVAL_DIR

Videos: every video of the split once, 1 clip or --eval_clips=K clips (logits averaged)
or the first --eval_frames=N frames, centre crop; top-1, top-5, mean class accuracy,
per-class accuracy and the confusion matrix, as a table, TensorBoard summaries (tags in
docs/monitoring.md), a confusion matrix PNG and a JSON report under --eval_dir; progress
lines on stderr about every 5% of the split:

    python eval.py --dataset_name=ucf101 --dataset_dir=/data/ucf101_rgb_s1 \
        --model_name=i3d --checkpoint_path=TRAIN_DIR --eval_clips=10 --eval_dir=EVAL_DIR

Two streams: add --fusion --flow_checkpoint_path=FLOW_TRAIN_DIR
--flow_dataset_dir=/data/ucf101_flow_s1. Beside a training job: --watch (each new
checkpoint once; ends after --max_number_of_steps, the trainer's training_done.json, or
--watch_timeout seconds without a new checkpoint).

Exit status (core/errors.py, the same table for every entry point): 0 done; 2 a usage
error; 3 a damaged record shard (the line names it and the command that rebuilds it);
4 some videos or images could not be scored (a frame or image that does not decode, or
records missing from a shard): they are listed in the table and the report, and the
figures are over the rest; 5 accuracy below --min_accuracy (counted: 342 of 360 reaches
0.95), or --watch saw no checkpoint (one `error:` line each).
"""

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags, logging

from evaluation import run
from evaluation.config import EvalConfig
from evaluation.setup import from_run_records
from core import errors
from core.params import (config_from_flags, define_flags, given_flags, parse_flags,
                         reject_positional_arguments)

define_flags(EvalConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  logging.set_verbosity(logging.INFO)
  results = []
  try:
    config, settings = from_run_records(config_from_flags(EvalConfig, FLAGS),
                                        given_flags(EvalConfig, FLAGS))
    for result in run.evaluations(config, settings):
      print(run.summary(result), flush=True)
      results.append(result)
  except errors.EXPECTED as error:
    return errors.report(error)
  return run.exit_status(config, results)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
