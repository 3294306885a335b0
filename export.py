r"""Exports a trained video classifier as the next version of a model TF Serving loads.

    python export.py --checkpoint_path=runs/ucf101_rgb_s1 --export_dir=models/ucf101_rgb_s1
    tensorflow_model_server --model_base_path=$PWD/models/ucf101_rgb_s1 \
        --model_name=ucf101_rgb_s1

takes the network, its width, the records (--dataset_dir), the clip frames and the crop
from the run's record (runs/ucf101_rgb_s1/flags.cfg); a flag given wins (one log line
names those that differ from the run's), and without a record (a checkpoint outside a
train_dir) --model_name and --dataset_dir are needed. It
writes models/ucf101_rgb_s1/<version>/ (saved_model.pb, variables/, and labels.txt and
model_info.json in assets.extra/): version 1 in a new directory, then one more than the
highest there, or --export_version=N (never one that exists). The version is renamed into
place complete, so a model server watching the directory picks it up whole; the last
line printed gives the command that serves it.

The serving signature takes clips float32 [batch, frames, height, width, channels] in
[-1, 1] and returns logits, probabilities and the top --top_k classes (indices, labels,
probabilities); see serving/export_model.py. Moving-average weights are exported when the
checkpoint has them. predict.py reads the directory (or one version of it).

Exit status (core/errors.py, the same table for every entry point): 0 exported; 2 a usage
error; 6 the export directory could not be written (one `error:` line each).
"""

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags, logging

from serving.export_model import ExportConfig, export_saved_model, from_run_record
from core import errors
from core.params import (config_from_flags, define_flags, given_flags, parse_flags,
                         reject_positional_arguments)

define_flags(ExportConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  logging.set_verbosity(logging.INFO)
  try:
    config, settings = from_run_record(config_from_flags(ExportConfig, FLAGS),
                                       given_flags(ExportConfig, FLAGS))
    result = export_saved_model(config, settings)
  except errors.EXPECTED + (OSError,) as error:
    return errors.report(error)
  print(result.summary())
  return errors.OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
