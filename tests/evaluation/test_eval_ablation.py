"""--repeat_first_frame in evaluation: the no-motion ablation is evaluated the way it was
trained (every frame of a clip is its first frame), and only for videos."""

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import clip_input
from datasets.inputs.input_settings import InputSettings
from evaluation.config import EvalConfig
from evaluation import run
from tests import video_testdata
from tests.evaluation.placeholder_checkpoint import placeholder_checkpoint
from tf_compat import tf
from core.params import ConfigError


def test_refused_for_image_datasets(digits_dir, tmp_path):
  config = EvalConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                      checkpoint_path=placeholder_checkpoint(tmp_path),
                      repeat_first_frame=True)
  with pytest.raises(ConfigError, match='--repeat_first_frame=True applies to video'):
    list(run.evaluations(config))


def test_evaluation_reads_static_clips(tmp_path_factory, monkeypatch):
  """The flag reaches the clip pipeline: every clip evaluated is one frame repeated."""
  seen = []
  build = clip_input.build_clip_dataset

  def spy(split, settings, **kwargs):
    seen.append(settings.repeat_first_frame)
    return build(split, settings, **kwargs)

  monkeypatch.setattr(clip_input, 'build_clip_dataset', spy)
  data_dir = video_testdata.converted(tmp_path_factory, 'rgb')
  prefix, _, _ = video_testdata.random_i3d_checkpoint(
      str(tmp_path_factory.mktemp('ablation') / 'model.ckpt'), channels=3)
  config = EvalConfig(dataset_name='video_folder', dataset_dir=data_dir, model_name='i3d',
                      dataset_split_name='test', checkpoint_path=prefix,
                      depth_multiplier=video_testdata.DEPTH, clip_frames=8,
                      eval_image_size=video_testdata.CROP, repeat_first_frame=True,
                      eval_dir=str(tmp_path_factory.mktemp('eval')))
  list(run.evaluations(config))
  assert seen and all(seen)
  split = dataset_factory.get_dataset('video_folder', 'test', data_dir)
  with tf.Graph().as_default(), tf.Session() as sess:
    clips = sess.run(tf.data.make_one_shot_iterator(build(split, InputSettings(
        batch_size=2, clip_frames=8, image_size=video_testdata.CROP,
        repeat_first_frame=True), is_training=False)).get_next()[0])
  np.testing.assert_array_equal(clips, np.broadcast_to(clips[:, :, :1], clips.shape))
