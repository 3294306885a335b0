"""Trains a classifier on one machine (clones) or many (replicas), TF-Slim style.

    python train_image_classifier.py --dataset_name=digits --dataset_dir=DIR \
        --model_name=lenet --train_dir=DIR --num_clones=2 --clone_on_cpu

Flags keep train_image_classifier's names and defaults (see training/config.py for the
differences and why); `--flagfile=configs/...cfg` reads a recipe.
"""

import sys

import tf_compat  # pylint: disable=unused-import  (first: TF set-up before anything else)
from absl import app, flags, logging

from training.config import TrainConfig
from training.params import (ConfigError, config_from_flags, define_flags, parse_flags,
                             reject_positional_arguments)
from training.train import train

define_flags(TrainConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return 2
  logging.set_verbosity(logging.INFO)
  try:
    train(config_from_flags(TrainConfig, FLAGS))
  except ConfigError as error:
    print('error: %s' % error, file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
