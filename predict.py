"""Classifies a video file with a model exported by export.py; prints the top 5 classes.

    python predict.py --model_dir=models/ucf101_rgb_s1 --video=clip.mp4 [--json]
    python predict.py --model_dir=models/ucf101_rgb_s1/2 --video=clip.mp4

--model_dir is export.py's --export_dir (its highest version is used, as TF Serving
serves it) or one version directory in it; the version used is printed.

The video is prepared as evaluation prepared its data (decoding, resizing, frame
sampling, centre crop, [-1, 1] scaling; see serving/predict_video.py).

Exit status (core/errors.py, the same table for every entry point): 0 done; 2 a usage
error; 3 a file that is not a readable video (one `error:` line each).
"""

import json

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags

from serving.predict_video import PredictConfig, predict_video
from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)

define_flags(PredictConfig)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    config = config_from_flags(PredictConfig, FLAGS)
    prediction = predict_video(config)
  except errors.EXPECTED as error:
    return errors.report(error)
  if config.json:
    print(json.dumps(prediction.as_dict()))
  else:
    print('%s (%d frames, %d clip%s; model %s):' % (
        prediction.video, prediction.num_frames, prediction.num_clips,
        '' if prediction.num_clips == 1 else 's', prediction.model_dir))
    for rank, (name, _, probability) in enumerate(prediction.top, start=1):
      print('%2d. %-30s %6.2f%%' % (rank, name, 100 * probability))
  return errors.OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
