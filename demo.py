r"""The video demo (`make demo`): I3D learns motion direction on this machine, end to end.

    python demo.py [--output_dir=runs/demo]

Runs, one after the other, the commands a user runs (each printed before it starts, its
output in <output_dir>/logs/<stage>.log):
  videos    python -m datasets.make_synthetic_videos: 4 classes of textures moving up,
            down, left or right (a single frame carries no label)
  convert   python -m datasets.convert_videos: clip records
  train     python train_image_classifier.py --flagfile=configs/demo_... : I3D from
            scratch, 2 clones on 2 logical CPU devices
  eval      python eval.py: every held-out test video, one centre clip
  export    python export.py: a SavedModel in TF Serving's layout
  predict   python predict.py: one held-out test video through the exported model
then prints a summary: test accuracy, the prediction, the time of each stage, where the
TensorBoard logs are and the command that opens them. The digits demo is `make
demo-digits`.

Exit status (the table in core/errors.py): 0 done with test accuracy >= --min_accuracy;
otherwise the status of the stage that failed (5 from eval: accuracy below the target);
2 bad flags.
"""

# --help is answered before TensorFlow loads: the imports above the call hold none of
# it, and the rest follow the call on purpose.
# pylint: disable=wrong-import-position
from core.params import answer_help
from demos.video import DemoConfig

answer_help(DemoConfig)

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags

from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from demos.video import run_demo

define_flags(DemoConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    return run_demo(config_from_flags(DemoConfig, FLAGS))
  except errors.EXPECTED + (OSError,) as error:
    return errors.report(error)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
