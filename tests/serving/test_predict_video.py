"""serving.predict_video: a video file is prepared exactly as its converted record is
evaluated. Reference: the converter's records decoded with Pillow, frames sampled,
cropped and scaled in NumPy (tests/video_testdata)."""

import os
import shutil

import numpy as np
import pytest

from datasets.inputs.input_settings import Sampling
from serving.predict_video import PredictConfig, predict_video, prepare_clips
from tests import video_testdata as vt
from tests.sessions import assert_gpu_options
from core.errors import DataError
from core.params import ConfigError


def info(modality, sampling):
  """model_info as read_model_info returns it: "sampling" read back into a Sampling."""
  return {'modality': modality, 'channels': 3 if modality == 'rgb' else 2, 'num_classes': 3,
          'sampling': Sampling.from_json(dict(sampling, crop_size=vt.CROP), 'model_info'),
          'decoding': {'short_side': vt.SHORT_SIDE, 'fps': 0.0, 'jpeg_quality': 90}}


@pytest.mark.parametrize('modality,sampling,reference', [
    ('rgb', {'mode': 'eval_clips', 'clips': 3, 'clip_frames': 5},
     dict(eval_clips=3, clip_frames=5)),
    ('rgb', {'mode': 'eval_frames', 'frames': 16}, dict(eval_frames=16)),
    ('flow', {'mode': 'eval_clips', 'clips': 1, 'clip_frames': 8},
     dict(eval_clips=1, clip_frames=8)),
])
def test_clips_equal_those_of_the_converted_record(tmp_path_factory, modality, sampling,
                                                   reference):
  videos = vt.synthetic_videos(tmp_path_factory)
  records = vt.read_records(vt.converted(tmp_path_factory, modality), modality=modality)
  for video in [v for v in videos['videos'] if v['split'] == 'test'][:2]:
    video_id = os.path.splitext(os.path.basename(video['path']))[0]
    clips, num_frames = prepare_clips(os.path.join(videos['video_dir'], video['path']),
                                      info(modality, sampling))
    expected = vt.reference_clips(records[video_id][1], **reference)
    assert num_frames == len(records[video_id][1])
    assert clips.shape == expected.shape
    np.testing.assert_allclose(clips, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize('content,reason', [
    (None, 'no such file'), (b'', 'empty file'), (b'hello, not a video\n', 'not a video')])
def test_a_file_that_is_not_a_readable_video(tmp_path, content, reason):
  path = str(tmp_path / 'clip.mp4')
  if content is not None:
    with open(path, 'wb') as handle:
      handle.write(content)
  # A missing path is a usage mistake (2); a file that does not decode is data (3).
  with pytest.raises(ConfigError if content is None else DataError) as error:
    prepare_clips(path, info('rgb', {'mode': 'eval_frames', 'frames': 4}))
  message = str(error.value)
  assert message.startswith('--video=%s: ' % path) and reason in message
  assert '\n' not in message


def test_a_directory_that_is_not_an_export(tmp_path):
  with pytest.raises(ConfigError, match='--model_dir=.* holds neither saved_model.pb nor '
                                        'numbered versions'):
    predict_video(PredictConfig(model_dir=str(tmp_path), video='clip.mp4'))
  (tmp_path / '1').mkdir()
  (tmp_path / '1' / 'saved_model.pb').write_bytes(b'')
  with pytest.raises(ConfigError, match=r'--model_dir=.*: .*1 holds no '
                                        r'assets.extra/model_info.json: not a model written '
                                        r'by export.py$'):
    predict_video(PredictConfig(model_dir=str(tmp_path), video='clip.mp4'))
  (tmp_path / '1' / 'model_info.json').write_text('{}')   # the layout before versions
  with pytest.raises(ConfigError, match='predates numbered versions: export it again'):
    predict_video(PredictConfig(model_dir=str(tmp_path / '1'), video='clip.mp4'))
  with pytest.raises(ConfigError, match='--video is required'):
    predict_video(PredictConfig(model_dir=str(tmp_path)))


@pytest.mark.slow
def test_gpu_options_reach_every_prediction_session(tmp_path, tmp_path_factory,
                                                    session_configs):
  """Both sessions, the input pipeline's and the SavedModel's. The model: the shared
  export (tests/video_testdata.py), copied since the test removes its labels.txt."""
  videos = vt.synthetic_videos(tmp_path_factory)
  model_dir = str(tmp_path / 'm' / '1')
  shutil.copytree(vt.shared_export(tmp_path_factory)[1], model_dir)
  video = [v for v in videos['videos'] if v['split'] == 'test'][0]
  del session_configs[:]
  predict_video(PredictConfig(model_dir=model_dir, video=os.path.join(
      videos['video_dir'], video['path']), gpu_allow_growth=False, gpu_memory_fraction=0.5))
  assert len(session_configs) == 2
  assert_gpu_options(session_configs, False, 0.5)
  with pytest.raises(ConfigError, match=r'^--gpu_memory_fraction=2.0 must be in \[0, 1\]'):
    predict_video(PredictConfig(model_dir=model_dir, video='x.mp4', gpu_memory_fraction=2.0))
  os.remove(os.path.join(model_dir, 'assets.extra', 'labels.txt'))
  with pytest.raises(ConfigError, match=r'labels.txt is missing; export the model again '
                                        r'with export.py$'):
    predict_video(PredictConfig(model_dir=model_dir, video='x.mp4'))
