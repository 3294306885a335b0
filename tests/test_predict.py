"""predict.py's path in the test's own process (the command line read as predict.py reads
it, predict_video, the JSON it prints), against evaluation: for a test video, the
probabilities are eval's probabilities for that video (same checkpoint, same sampling),
whether --model_dir is export.py's base directory or the version directory in it.
predict.py's contract, in a fresh process: a file that is not a video is one `error:`
line and status 3."""

import concurrent.futures
import json
import os

import numpy as np
import pytest

from core import errors
from core.params import config_from_argv
from evaluation import run
from evaluation.config import EvalConfig
from serving.predict_video import PredictConfig, predict_video
from tests import video_testdata as vt
from tests.entries import assert_one_error_line, run_entry


@pytest.mark.slow
def test_predict_returns_what_evaluation_scores(tmp_path, tmp_path_factory):
  videos = vt.synthetic_videos(tmp_path_factory)
  rgb_dir = vt.converted(tmp_path_factory, 'rgb')
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  sampling = vt.EXPORT_SAMPLING   # 2 clips of 8 frames, crop 32
  # export.py's export of that checkpoint, made once for this and test_predict_video.
  model_dir, version_dir = vt.shared_export(tmp_path_factory)
  video = [v for v in videos['videos'] if v['split'] == 'test'][0]
  path = os.path.join(videos['video_dir'], video['path'])
  text_file = tmp_path / 'notes.mp4'
  text_file.write_text('not a video\n')
  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    # The contract, in a fresh process while this one predicts and evaluates.
    bad = pool.submit(run_entry, ['predict.py', '--model_dir=%s' % model_dir,
                                  '--video=%s' % text_file])
    config, _ = config_from_argv(PredictConfig, ['--model_dir=%s' % model_dir,
                                                 '--video=%s' % path, '--json'])
    assert config.json
    printed = json.loads(json.dumps(predict_video(config).as_dict()))   # what --json prints
    evaluated = list(run.evaluations(EvalConfig(
        dataset_name='video_folder', dataset_dir=rgb_dir, model_name='i3d',
        checkpoint_path=prefix, batch_size=3, **sampling)))[0].result.primary
    bad = bad.result()

  index = list(evaluated.video_ids).index(os.path.splitext(os.path.basename(path))[0])
  expected = evaluated.probabilities()[index]
  order = np.argsort(-expected, kind='stable')
  assert [p['index'] for p in printed['predictions']] == order.tolist()  # 3 classes < 5
  np.testing.assert_allclose([p['probability'] for p in printed['predictions']],
                             expected[order], rtol=0, atol=1e-5)
  names = ['MoveDown', 'MoveLeft', 'MoveRight']
  assert [p['label'] for p in printed['predictions']] == [names[i] for i in order]
  assert (printed['num_clips'], printed['num_frames']) == (2, video['num_frames'])
  assert printed['model'] == version_dir == os.path.join(model_dir, '1')

  from_version = predict_video(PredictConfig(model_dir=version_dir, video=path))
  assert from_version.as_dict() == printed
  np.testing.assert_allclose(from_version.probabilities, expected, rtol=0, atol=1e-5)

  assert_one_error_line(bad, '--video=%s' % text_file, 'not a video', status=errors.DATA)
