"""The video demo behind `python demo.py` (`make demo`); see demo.py for what it shows.

    status = run_demo(DemoConfig(output_dir='runs/demo'))

Each stage is the real command line, run as a subprocess with its output in
<output_dir>/logs/<stage>.log, so the demo shows exactly what a user types. The recipe is
configs/demo_synthetic_i3d_rgb_2xcpu_8f64.cfg (its header says what to expect).
"""

import dataclasses
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Optional

from core import errors
from core.params import param

__all__ = ['DemoConfig', 'run_demo', 'RECIPE']

RECIPE = 'configs/demo_synthetic_i3d_rgb_2xcpu_8f64.cfg'


@dataclasses.dataclass(frozen=True)
class DemoConfig:
  """demo.py's flags."""
  # Demo.
  output_dir: str = param('runs/demo', 'Where videos, records, the run, the evaluation, '
                          'the model and the logs go (replaced if it exists).')
  min_accuracy: float = param(0.9, 'Test accuracy the demo must reach.')
  # Data.
  videos_per_class: int = param(48, 'Synthetic videos per motion direction.')
  # Training.
  train_steps: Optional[int] = param(None, 'Training steps (default: the recipe\'s 600). '
                                     'Fewer do not reach the accuracy: set --min_accuracy '
                                     'with it.')
  python: Optional[str] = param(None, 'Interpreter for the stages (default: this one).')


def _stages(config):
  """Yields (name, argv) of the demo's commands in order. A generator: each stage's command
  is made once the stages before it have run (predict names a video the first one made).
  Eval and export take the network, width, data, clip and crop from the run's record."""
  out = config.output_dir
  yield 'videos', ['-m', 'datasets.make_synthetic_videos', '--output_dir=%s/videos' % out,
                   '--num_classes=4', '--videos_per_class=%d' % config.videos_per_class,
                   '--sizes=72x96,80x104', '--min_frames=8', '--max_frames=32']
  yield 'convert', ['-m', 'datasets.convert_videos', '--dataset_name=video_folder',
                    '--video_dir=%s/videos/videos' % out,
                    '--splits_dir=%s/videos/splits' % out, '--output_dir=%s/data' % out,
                    '--short_side=72', '--num_shards=4', '--num_processes=2']
  steps = ([] if config.train_steps is None else
           ['--max_number_of_steps=%d' % config.train_steps])
  yield 'train', ['train_image_classifier.py', '--flagfile=%s' % RECIPE,
                  '--dataset_dir=%s/data' % out, '--train_dir=%s/train' % out] + steps
  yield 'eval', ['eval.py', '--checkpoint_path=%s/train' % out, '--dataset_split_name=test',
                 '--eval_dir=%s/eval' % out, '--min_accuracy=%r' % config.min_accuracy]
  yield 'export', ['export.py', '--checkpoint_path=%s/train' % out,
                   '--export_dir=%s/model' % out]
  yield 'predict', ['predict.py', '--model_dir=%s/model' % out, '--json',
                    '--video=%s' % _held_out_video(out)]


def _held_out_video(out):
  """The first video of the test list the videos stage wrote."""
  with open(os.path.join(out, 'videos', 'splits', 'testlist01.txt')) as handle:
    first = handle.readline().split()[0]
  return os.path.join(out, 'videos', 'videos', first)


def _run(name, argv, python, log_dir):
  """Runs one stage; -> (exit status, seconds, stdout)."""
  command = [python] + argv
  print('[demo] %s: %s' % (name, ' '.join(command)), flush=True)
  start = time.monotonic()
  with open(os.path.join(log_dir, name + '.log'), 'w') as log:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True,
                            check=False)
    log.write(result.stdout)
  seconds = time.monotonic() - start
  print('[demo] %s: exit %d after %.0f s' % (name, result.returncode, seconds), flush=True)
  return result.returncode, seconds, result.stdout


def run_demo(config, run_stage=None):
  """Runs every stage; prints the summary; returns the exit status (see demo.py).
  run_stage(name, argv, python, log_dir) -> (exit status, seconds, stdout) runs one stage;
  by default the command line `python argv...` in a process of its own, as a user types it
  (a test calls the stages' entries in its own process instead)."""
  run_stage = run_stage or _run
  errors.require(config.output_dir, '--output_dir is required')
  errors.require(0 <= config.min_accuracy <= 1, '--min_accuracy=%r must be in [0, 1]'
                 % config.min_accuracy)
  errors.require(config.videos_per_class >= 8, '--videos_per_class=%d must be >= 8'
                 % config.videos_per_class)
  errors.require(config.train_steps is None or config.train_steps >= 1,
                 '--train_steps=%r must be >= 1' % config.train_steps)
  shutil.rmtree(config.output_dir, ignore_errors=True)
  log_dir = os.path.join(config.output_dir, 'logs')
  os.makedirs(log_dir)
  python = config.python or sys.executable
  times, outputs = {}, {}
  for name, argv in _stages(config):
    status, times[name], outputs[name] = run_stage(name, argv, python, log_dir)
    if status != 0:
      print('[demo] %s failed (exit %d); its log: %s' % (
          name, status, os.path.join(log_dir, name + '.log')), flush=True)
      _print_summary(config, times, outputs)
      return status
  _print_summary(config, times, outputs)
  return errors.OK


def _accuracy(config):
  reports = sorted(glob.glob(os.path.join(config.output_dir, 'eval', 'report-*.json')))
  if not reports:
    return None
  with open(reports[-1]) as handle:
    report = json.load(handle)
  metrics = report['streams'][report['primary']]['metrics']
  return metrics['top1_correct'], metrics['num_videos']


def _print_summary(config, times, outputs):
  out = os.path.abspath(config.output_dir)
  lines = ['', '== demo summary ==']
  accuracy = _accuracy(config)
  if accuracy:
    correct, total = accuracy
    lines.append('test accuracy: %.4f (%d/%d held-out videos; target %g)'
                 % (correct / total, correct, total, config.min_accuracy))
  if outputs.get('predict'):
    prediction = json.loads(outputs['predict'])
    top = prediction['predictions'][0]
    video = prediction['video']
    true_class = os.path.basename(os.path.dirname(video))
    lines.append('prediction on held-out %s: %s (%.1f%%), true class %s' % (
        os.path.basename(video), top['label'], 100 * top['probability'], true_class))
  lines.append('time per stage: %s; total %.0f s' % (
      ', '.join('%s %.0f s' % item for item in times.items()), sum(times.values())))
  lines.append('TensorBoard logs: %s/train (training) and %s/eval (evaluation)' % (out, out))
  lines.append('open them with: tensorboard --logdir=%s' % out)
  lines.append('logs of every stage: %s/logs' % out)
  print('\n'.join(lines), flush=True)
