r"""Trains a classifier on one machine (clones) or many (replicas), TF-Slim style.

    python train_image_classifier.py --dataset_name=digits --dataset_dir=DIR \
        --model_name=lenet --train_dir=DIR --num_clones=2 --clone_on_cpu

Flags keep train_image_classifier's names and defaults (see training/config.py for the
differences and why); `--flagfile=configs/...cfg` reads a recipe. In a cluster every
task runs this same command plus `--ps_hosts --worker_hosts --job_name --task_index`
(or TF_CONFIG, or Slurm's environment: configs/slurm/); `python -m
deployment.launch_local` starts a whole cluster on this host.
Exit status (core/errors.py, the same table for every entry point): 0 done or stopped by
SIGTERM, 2 bad flags, 3 damaged records (a shard that cannot be read, or more videos with
frames that do not decode than --max_damaged_fraction allows; docs/monitoring.md),
6 train_dir could not be written, 7 the loss became NaN (the line names the step and the
last finite checkpoint), 138 cluster failure (docs/cluster.md).
"""

import os

# --help is answered before TensorFlow loads: the imports above the call hold none of
# it, and the rest follow the call on purpose.
# pylint: disable=wrong-import-position
from core.params import answer_help
from training.config import TrainConfig

answer_help(TrainConfig)

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags, logging

from training import lifecycle
from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)

define_flags(TrainConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  logging.set_verbosity(logging.INFO)
  try:
    job = lifecycle.resolve_job(config_from_flags(TrainConfig, FLAGS), os.environ)
  except errors.EXPECTED as error:
    return errors.report(error)
  status = lifecycle.run_job(job)
  if job.task is not None:
    lifecycle.exit_now(status)
  return status


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
