"""Evaluates a checkpoint (a file, or the latest in a directory) on a dataset split.

    python eval.py --dataset_name=digits --dataset_dir=DIR --model_name=lenet \
        --checkpoint_path=TRAIN_DIR --eval_dir=EVAL_DIR

Prints Accuracy and Recall@5 and writes them as TensorBoard summaries under --eval_dir.
"""

import sys

import tf_compat  # pylint: disable=unused-import  (first: TF set-up before anything else)
from absl import app, flags, logging

from evaluation.image_eval import EvalConfig, evaluate
from training.params import (ConfigError, config_from_flags, define_flags, parse_flags,
                             reject_positional_arguments)

define_flags(EvalConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return 2
  logging.set_verbosity(logging.INFO)
  config = config_from_flags(EvalConfig, FLAGS)
  try:
    result = evaluate(config)
  except ConfigError as error:
    print('error: %s' % error, file=sys.stderr)
    return 2
  print('Accuracy: %.4f  Recall@5: %.4f  (%d examples, step %d)' % (
      result.accuracy, result.recall_at_5, result.num_examples, result.global_step))
  if config.min_accuracy is not None and result.accuracy < config.min_accuracy:
    print('error: Accuracy %.4f is below --min_accuracy=%.4f'
          % (result.accuracy, config.min_accuracy), file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
