r"""The doctor: why are N clones slower than 1, on this machine?

    python -m training.doctor --flagfile=configs/digits_lenet_2xcpu.cfg \
        --dataset_dir=runs/demo/data --train_dir=/tmp/doctor

Takes the trainer's flags (the flagfile of a training, cluster flags set aside: it times
one worker) and, in one run, times the input pipeline alone, the model step on synthetic
data for 1..N clones and the full training step, and traces one step to see on which
devices the clones really ran. Prints a table and a verdict (input-bound, compute-bound,
clone overhead or memory) with the flags to change, and writes doctor.txt, doctor.json
and doctor.png (examples/sec against clones) into --doctor_dir (<train_dir>/doctor).
docs/doctor.md explains the verdicts. Run from the repository root.
Exit status (the table in core/errors.py): 0 a verdict, 2 bad flags, 3 unreadable data, 6 the output
could not be written.
"""

# --help is answered before TensorFlow loads: the imports above the call hold none of
# it, and the rest follow the call on purpose.
# pylint: disable=wrong-import-position
from core.params import answer_help
from training.config import TrainConfig
from training.doctor.settings import DoctorSettings

answer_help(TrainConfig, DoctorSettings)

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags, logging

from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from training.doctor.diagnosis import doctor_setup, run_doctor
from training.doctor.settings import check_settings

define_flags(TrainConfig)
define_flags(DoctorSettings)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  logging.set_verbosity(logging.INFO)
  try:
    settings = config_from_flags(DoctorSettings, FLAGS)
    check_settings(settings)   # the doctor's own flags first, then the training's
    run_doctor(doctor_setup(config_from_flags(TrainConfig, FLAGS)), settings)
  except errors.EXPECTED + (OSError,) as error:
    return errors.report(error)
  return errors.OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
