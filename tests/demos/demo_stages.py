"""The video demo's stages called in the test's own process, as each stage's entry `main`
calls its library after reading the same command line (core.params.config_from_argv):

    status = run_demo(config, run_stage=demo_stages.in_process)
    status = run_demo(config, run_stage=demo_stages.in_process_but('videos'))

Each stage's stdout is what its main prints (the demo reads predict's JSON from it), its
stderr goes to the stage's log as in `make demo`. Each entry's own process is started by
its contract test (tests/test_*_cli.py, tests/datasets/, tests/demos/test_video.py).
"""

import contextlib
import io
import json
import os
import time

from core import errors
from datasets.conversion import convert_videos
from datasets.conversion.convert_videos_config import (VideoConversion,
                                                         with_task_from_environment)
from datasets.synthetic import make_synthetic_videos
from datasets.synthetic.make_synthetic_videos import SyntheticVideosConfig
from demos import video
from evaluation import run
from serving.predict_video import PredictConfig, predict_video
from tests import entries
from training import lifecycle
from training.config import TrainConfig

__all__ = ['in_process', 'in_process_but']


def _videos(argv):
  status, summary = entries.call(SyntheticVideosConfig, argv,
                                    make_synthetic_videos.write_synthetic_videos)
  if summary is not None:
    print(make_synthetic_videos.summary_line(summary))
  return status


def _convert(argv):
  def convert(config):
    config = with_task_from_environment(config, os.environ)
    return config, convert_videos.convert_videos(config)
  status, converted = entries.call(VideoConversion, argv, convert)
  if converted is None:
    return status
  config, manifest = converted
  print(convert_videos.summary_line(manifest, config.output_dir))
  return errors.INCOMPLETE if manifest.get('skipped') else errors.OK


def _train(argv):
  status, job = entries.call(TrainConfig, argv,
                                lambda config: lifecycle.resolve_job(config, os.environ))
  return status if job is None else lifecycle.run_job(job)


def _eval(argv):
  status, results = entries.evaluate(argv)
  for result in results:
    print(run.summary(result))
  return status


def _export(argv):
  status, result = entries.export(argv)
  if result is not None:
    print(result.summary())
  return status


def _predict(argv):
  status, predicted = entries.call(PredictConfig, argv,
                                      lambda config: (config, predict_video(config)))
  if predicted is not None:
    config, prediction = predicted
    assert config.json   # the demo reads the JSON
    print(json.dumps(prediction.as_dict()))
  return status


_ENTRIES = {'datasets.make_synthetic_videos': _videos, 'datasets.convert_videos': _convert,
            'train_image_classifier.py': _train, 'eval.py': _eval, 'export.py': _export,
            'predict.py': _predict}


def in_process(name, argv, python, log_dir):
  """demos.video's run_stage: -> (exit status, seconds, stdout)."""
  del python
  entry, flags = (argv[1], argv[2:]) if argv[0] == '-m' else (argv[0], argv[1:])
  print('[demo] %s: %s (in this process)' % (name, ' '.join(argv)), flush=True)
  start = time.monotonic()
  stdout = io.StringIO()
  with open(os.path.join(log_dir, name + '.log'), 'w') as log:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(log):
      status = _ENTRIES[entry](flags)
    log.write(stdout.getvalue())
  seconds = time.monotonic() - start
  print('[demo] %s: exit %d after %.0f s' % (name, status, seconds), flush=True)
  return status, seconds, stdout.getvalue()


def in_process_but(*started):
  """A run_stage that runs the stages named `started` as the demo does, in processes of
  their own (demos.video's own runner), and the others in this process."""
  def run_stage(name, argv, python, log_dir):
    stage = video._run if name in started else in_process   # pylint: disable=protected-access
    return stage(name, argv, python, log_dir)
  return run_stage
