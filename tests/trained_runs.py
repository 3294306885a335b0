"""Tiny runs of the real trainer, made once per test run (tests/once.py), for what reads a
run's record (eval.py and export.py from flags.cfg, eval's batch-norm warning).

  * `i3d_run()`: I3D at depth 0.125 on tests/video_testdata.py's rgb records, 4-frame
    clips cropped to 32 (none of them I3D's defaults: 64 frames, 224, depth 1), 2 steps.
  * `lenet_run(digits_dir)`: LeNet with batch norm on digits, 3 steps.
  * `train(...)`: one more run of either kind, for a test's own (e.g. a moved run).

Each returns the train_dir. The runs' statistics have not settled (2 or 3 steps at
batch-norm decay 0.999): eval warns about that, which the warning's tests rely on.
"""

import os

from tests import video_testdata as vt
from tests.once import made_once
from training import train as train_module
from training.config import TrainConfig

I3D_FLAGS = dict(dataset_name='video_folder', model_name='i3d', clip_frames=4,
                 train_image_size=32, depth_multiplier=vt.DEPTH, batch_size=2,
                 max_number_of_steps=2)
LENET_FLAGS = dict(dataset_name='digits', model_name='lenet', use_batch_norm=True,
                   batch_size=16, max_number_of_steps=3)


def train(train_dir, dataset_dir, **flags):
  """Trains a run (one clone, sgd, no timed saves) into train_dir; returns it."""
  values = dict(train_dir=str(train_dir), dataset_dir=dataset_dir, optimizer='sgd',
                learning_rate=0.01, learning_rate_decay_type='fixed', num_readers=1,
                num_preprocessing_threads=1, log_every_n_steps=1, save_summaries_secs=600,
                save_interval_secs=600)
  values.update(flags)
  train_module.train(TrainConfig(**values))
  return str(train_dir)


def i3d_run(tmp_path_factory):
  return made_once(tmp_path_factory, 'trained_i3d', lambda directory: train(
      os.path.join(directory, 'train'), vt.converted(tmp_path_factory, 'rgb'), **I3D_FLAGS))


def lenet_run(tmp_path_factory, digits_dir):
  return made_once(tmp_path_factory, 'trained_lenet', lambda directory: train(
      os.path.join(directory, 'train'), digits_dir, **LENET_FLAGS))
