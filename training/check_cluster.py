r"""Checks a cluster before launch, from the submitting host, with the trainer's flags.

    python -m training.check_cluster \
        --flagfile=configs/cluster/ucf101_i3d_rgb_kinetics_10x8_64f_sync_10nodes.cfg \
        --dataset_dir=/shared/data/ucf101_rgb_s1 --train_dir=/shared/runs/ucf101_rgb_s1

Takes the same flags as train_image_classifier.py (and TF_CONFIG, --addressing) and runs
the checks that need no running job: every host resolves, no port of the cluster is taken
(free on this machine, nothing answering on the others), the trainer's own checks of its
flags pass for the chief of that cluster (--replicas_to_aggregate against the workers, a
shard file per worker, ...), train_dir takes files. A job without addresses yet is given
by its layout: `--launch_local_workers=W [--launch_local_ps=P]` for a launch_local job,
`--addressing=slurm --num_ps_tasks=P --slurm_ntasks=P+W --slurm_nodes=N` for a Slurm job
from its submitting host. Prints `ok: ...` for each check that passes and one
`error: ...` line per problem (docs/cluster.md, "Check before launch"). The work is in
training/preflight_checks.py and deployment/cluster/preflight.py.
Exit status (the table in core/errors.py): 0 every check passed, 2 a check failed or bad
flags.
"""

import os

# --help is answered before TensorFlow loads: the imports above the call hold none of
# it, and the rest follow the call on purpose.
# pylint: disable=wrong-import-position
from core.params import answer_help
from deployment.cluster.preflight import PlannedJob
from training.config import TrainConfig

answer_help(TrainConfig, PlannedJob)

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags

from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from training.preflight_checks import check_before_launch

define_flags(TrainConfig)
define_flags(PlannedJob)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  results = check_before_launch(config_from_flags(TrainConfig, FLAGS), os.environ,
                                config_from_flags(PlannedJob, FLAGS))
  for passed, line in results:
    if passed:
      print('ok: %s' % line, flush=True)
    else:
      errors.print_error(line)
  return errors.OK if all(passed for passed, _ in results) else errors.USAGE


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
