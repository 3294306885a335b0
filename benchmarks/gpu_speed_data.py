"""The scratch datasets `benchmarks.gpu_speed` needs for the trainer's set-up.

The benchmark feeds the model synthetic zeros; the trainer still resolves a dataset split
(classes, modality, the input's batch shapes), so a few records of each kind are made with
the project's own converters: 8 random 32x32 RGB images in two classes (`image_folder`,
cifarnet's shape) and 8 short synthetic motion videos (`video_folder`, rgb). A few
seconds; only their shapes matter.
"""

import os

import numpy as np
from PIL import Image

from core import errors

__all__ = ['make_data']


def _images(image_dir):
  rng = np.random.RandomState(0)
  for label in ('a', 'b'):
    os.makedirs(os.path.join(image_dir, label), exist_ok=True)
    for index in range(4):
      pixels = rng.randint(0, 256, (32, 32, 3)).astype(np.uint8)
      Image.fromarray(pixels).save(os.path.join(image_dir, label, '%d.png' % index))


def make_data(work_dir, models):
  """{'image': records dir, 'video': records dir} of what `models` need, made in work_dir.

  Raises:
    errors.DataError: a converter failed (its message says why).
  """
  # pylint: disable=import-outside-toplevel  (the converters are only needed here)
  from datasets.conversion.convert_images import convert
  from datasets.conversion.convert_videos import VideoConversion, convert_videos
  from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
  dirs = {}
  try:
    if 'cifarnet' in models:
      _images(os.path.join(work_dir, 'images'))
      dirs['image'] = os.path.join(work_dir, 'image_records')
      convert('image_folder', dirs['image'], image_dir=os.path.join(work_dir, 'images'),
              num_shards=1, test_fraction=0.25)
    if 'i3d' in models:
      videos = make_synthetic_videos(os.path.join(work_dir, 'videos'), num_classes=2,
                                     videos_per_class=4, min_frames=8, max_frames=12,
                                     sizes=((48, 64),), seed=0)
      dirs['video'] = os.path.join(work_dir, 'video_records')
      convert_videos(VideoConversion(
          dataset_name='video_folder', output_dir=dirs['video'],
          video_dir=videos['video_dir'], splits_dir=videos['split_dir'], short_side=48,
          num_processes=1, num_shards=1, progress=False))
  except errors.ConfigError as error:
    raise errors.DataError('the benchmark\'s scratch data in %s: %s' % (work_dir, error))
  return dirs
