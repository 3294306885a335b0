"""Video evaluation (evaluation.run / video_eval) against references computed here.

Data: the synthetic motion videos converted to rgb and flow records (tests/video_testdata).
References: records decoded with Pillow, frames sampled, centre-cropped and scaled in
NumPy, an I3D loaded by name from the checkpoint's values in a graph of its own, logits
averaged over clips in NumPy, metrics counted in plain Python.
"""

import dataclasses
import glob
import json
import os
import shutil

import numpy as np
import pytest

from evaluation import run
from evaluation.config import EvalConfig
from evaluation.video_eval import VideoEvalResult
from tests import video_testdata as vt
from tests.evaluation import tensorboard_events as tbe
from tests.evaluation.placeholder_checkpoint import placeholder_checkpoint
from tests.sessions import assert_gpu_options
from core.params import ConfigError

NUM_TEST = 6


@pytest.fixture(scope='module')
def rgb_dir(tmp_path_factory):
  return vt.converted(tmp_path_factory, 'rgb')


@pytest.fixture(scope='module')
def flow_dir(tmp_path_factory):
  return vt.converted(tmp_path_factory, 'flow')


@pytest.fixture(scope='module')
def rgb_model(tmp_path_factory):
  """(prefix, raw values, shadow values): random I3D with moving averages, step 7."""
  return vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')


@pytest.fixture(scope='module')
def flow_model(tmp_path_factory):
  return vt.shared_checkpoint(tmp_path_factory, 'flow')


def config(dataset_dir, checkpoint, **overrides):
  values = dict(dataset_name='video_folder', dataset_dir=dataset_dir, model_name='i3d',
                checkpoint_path=checkpoint, depth_multiplier=vt.DEPTH, eval_image_size=vt.CROP,
                num_preprocessing_threads=2)
  values.update(overrides)
  return EvalConfig(**values)


def evaluate(cfg):
  results = list(run.evaluations(cfg))
  assert len(results) == 1
  return results[0]


def clip_reference(dataset_dir, values, modality='rgb', **sampling):
  """{video id: (label, logits [K, C] of each of the video's clips)}."""
  videos = vt.read_records(dataset_dir, modality=modality)
  ids = sorted(videos)
  clips = [vt.reference_clips(videos[i][1], **sampling) for i in ids]
  logits = vt.reference_logits(values, np.concatenate(clips))
  out, start = {}, 0
  for video_id, video_clips in zip(ids, clips):
    out[video_id] = (videos[video_id][0], logits[start:start + len(video_clips)])
    start += len(video_clips)
  return out


def averaged(by_clip, clips=None):
  """{video id: (label, logits [C] averaged over the first `clips` (all) clips)}."""
  return {i: (label, logits[:clips].mean(0)) for i, (label, logits) in by_clip.items()}


def reference(dataset_dir, values, modality='rgb', **sampling):
  """{video id: (label, logits [C] averaged over the video's clips)}."""
  return averaged(clip_reference(dataset_dir, values, modality, **sampling))


@pytest.fixture(scope='module')
def rgb_shadow_clips(rgb_dir, rgb_model):
  """clip_reference of rgb_model's averaged weights, 2 clips of 8 frames a video. Their
  first clips are the 1-clip sampling's (clip k starts at frame k * (T - 8) // (K - 1)),
  so this one reference serves the 2-clip and the 1-clip tests."""
  return clip_reference(rgb_dir, rgb_model[2], eval_clips=2, clip_frames=8)


def counted_metrics(scores, labels, num_classes=vt.NUM_CLASSES):
  """top-1, top-5, per-class accuracy, confusion, counted example by example."""
  confusion = [[0] * num_classes for _ in range(num_classes)]
  top5 = 0
  for row, label in zip(scores, labels):
    order = sorted(range(num_classes), key=lambda c, row=row: (-row[c], c))
    confusion[label][order[0]] += 1
    top5 += label in order[:5]
  per_class = [confusion[c][c] / sum(confusion[c]) for c in range(num_classes)]
  top1 = sum(confusion[c][c] for c in range(num_classes)) / len(labels)
  return top1, top5 / len(labels), per_class, confusion


def check_against_reference(stream, expected, metrics):
  assert sorted(stream.video_ids) == sorted(expected)  # every video, each once
  assert len(stream.video_ids) == NUM_TEST
  ordered = np.stack([expected[i][1] for i in stream.video_ids])
  np.testing.assert_allclose(stream.logits, ordered, rtol=1e-4, atol=1e-4)
  labels = [expected[i][0] for i in stream.video_ids]
  assert stream.labels.tolist() == labels
  # Counted from the logits the evaluation computed (equal to the reference's to 1e-4
  # above): a near tie of the reference could rank the other way under another CPU's
  # summation order, which says nothing about the metrics.
  top1, top5, per_class, confusion = counted_metrics(stream.logits, labels)
  assert metrics.top1 == pytest.approx(top1)
  assert metrics.top5 == pytest.approx(top5)
  np.testing.assert_allclose(metrics.per_class_accuracy, per_class)
  assert metrics.mean_class_accuracy == pytest.approx(np.mean(per_class))
  assert metrics.confusion.tolist() == confusion


def test_clips_averaged_per_video_with_moving_averages(rgb_dir, rgb_model, rgb_shadow_clips,
                                                       session_configs):
  """K=2 clips of 8 frames, batches of 4 videos (the last one partial): the averaged
  weights (present in the checkpoint) and batch norm's moving statistics are used. Every
  evaluation session has training's default GPU options (once a test of its own,
  test_gpu_options_reach_every_evaluation_session without options)."""
  prefix, _, _ = rgb_model
  cfg = config(rgb_dir, os.path.dirname(prefix), eval_clips=2, clip_frames=8, batch_size=4)
  del session_configs[:]
  result = evaluate(cfg)
  assert_gpu_options(session_configs, True, 0.0)
  assert isinstance(result.result, VideoEvalResult)
  stream = result.result.primary
  assert (stream.name, stream.checkpoint, stream.global_step) == ('rgb', prefix, 7)
  assert stream.moving_averages
  expected = averaged(rgb_shadow_clips)
  check_against_reference(stream, expected, result.result.metrics['rgb'])
  text = run.summary(result)
  assert 'video_folder/test: 6 videos, 2 clips x 8 frames, centre crop 32' in text
  assert prefix + ' (7, averaged)' in text


def test_first_frames_with_raw_weights(rgb_dir, rgb_model, session_configs):
  """The first 12 frames (videos of 6-14 frames loop), --use_moving_averages=false; given
  GPU options reach every evaluation session (once a test of its own,
  test_gpu_options_reach_every_evaluation_session with options)."""
  prefix, values, _ = rgb_model
  del session_configs[:]
  result = evaluate(config(rgb_dir, prefix, eval_frames=12, use_moving_averages='false',
                           batch_size=5, gpu_allow_growth=False, gpu_memory_fraction=0.3))
  assert_gpu_options(session_configs, False, 0.3)
  assert not result.result.primary.moving_averages
  expected = reference(rgb_dir, values, eval_frames=12)
  check_against_reference(result.result.primary, expected, result.result.metrics['rgb'])


def test_fusion_report_and_summaries(rgb_dir, flow_dir, rgb_model, flow_model,
                                     rgb_shadow_clips, tmp_path):
  rgb_prefix, _, _ = rgb_model
  flow_prefix, flow_values, _ = flow_model
  eval_dir = str(tmp_path / 'eval')
  result = evaluate(config(rgb_dir, rgb_prefix, fusion=True, flow_checkpoint_path=flow_prefix,
                           flow_dataset_dir=flow_dir, eval_clips=1, clip_frames=8,
                           batch_size=4, eval_dir=eval_dir))
  rgb, flow, fusion = result.result.streams
  assert [s.name for s in result.result.streams] == ['rgb', 'flow', 'fusion']
  expected_rgb = averaged(rgb_shadow_clips, clips=1)   # 1 clip of 8 frames
  expected_flow = reference(flow_dir, flow_values, 'flow', eval_clips=1, clip_frames=8)
  check_against_reference(flow, expected_flow, result.result.metrics['flow'])
  expected = {i: (label, logits + expected_flow[i][1])
              for i, (label, logits) in expected_rgb.items()}
  check_against_reference(fusion, expected, result.result.metrics['fusion'])
  assert result.accuracy == result.result.metrics['fusion'].top1

  assert result.report_path == os.path.join(eval_dir, 'report-7-flow-9.json')
  with open(result.report_path) as handle:
    report = json.load(handle)
  assert report['primary'] == 'fusion' and report['global_step'] == 7
  assert report['sampling'] == {'mode': 'eval_clips', 'clips': 1, 'clip_frames': 8,
                                'crop_size': vt.CROP}
  assert report['dataset'] == {'name': 'video_folder', 'split': 'test', 'num_videos': 6,
                               'unscored_videos': 0,
                               'dirs': {'rgb': rgb_dir, 'flow': flow_dir}}
  assert report['model'] == {'name': 'i3d', 'num_classes': 3,
                             'net_kwargs': {'depth_multiplier': vt.DEPTH}}
  streams = report['streams']
  assert streams['rgb']['checkpoint'] == rgb_prefix and streams['rgb']['moving_averages']
  assert streams['flow']['global_step'] == 9 and not streams['flow']['moving_averages']
  for name in ('rgb', 'flow', 'fusion'):
    metrics = result.result.metrics[name]
    assert streams[name]['metrics']['top1'] == pytest.approx(metrics.top1)
    assert streams[name]['confusion_matrix'] == metrics.confusion.tolist()
    assert [c['videos'] for c in streams[name]['per_class']] == [2, 2, 2]
  assert [c['name'] for c in streams['rgb']['per_class']] == ['MoveDown', 'MoveLeft',
                                                              'MoveRight']
  assert sorted(v['id'] for v in report['videos']) == sorted(expected)

  scalars, images = tbe.read_eval_dir(eval_dir)
  names = ['MoveDown', 'MoveLeft', 'MoveRight']
  for name, by_id in (('rgb', expected_rgb), ('flow', expected_flow), ('fusion', expected)):
    ids = sorted(by_id)
    figures = tbe.numpy_figures(np.stack([by_id[i][1] for i in ids]),
                                [by_id[i][0] for i in ids], vt.NUM_CLASSES)
    image = tbe.assert_stream_events(scalars, images, name, 7, figures, names)
    path = os.path.join(eval_dir, 'confusion-7-flow-9-%s.png' % name)
    assert path in result.confusion_paths
    with open(path, 'rb') as handle:
      assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    assert image.size[0] > 300 and image.size[1] > 300   # drawn, not 16 pixels a cell
  assert len([tag for tag in scalars if tag.startswith('per_class_accuracy/')]) == 9
  assert 'confusion matrix: %s' % result.confusion_paths[-1] in run.summary(result)


# A real 2-clone training run with moving averages (its checkpoint holds no clone prefix,
# evaluates to the reference of its averaged weights, and the same values saved from a plain
# one-device graph give the same numbers): checked on the run eval.py --watch follows,
# tests/evaluation/test_watch.py::test_watch_beside_training_evaluates_each_checkpoint_once,
# instead of one more I3D training here.


# Training's --gpu_allow_growth and --gpu_memory_fraction reach every evaluation session
# (so eval.py --watch beside training does not map every GPU's free memory): asserted on
# the evaluations above, test_clips_averaged_per_video_with_moving_averages (the defaults:
# growth, no cap) and test_first_frames_with_raw_weights (no growth, 0.3), instead of two
# more I3D evaluations of their own.


# ----------------------------------------------------------------------------- bad input


def _copy(directory, tmp_path, name):
  target = str(tmp_path / name)
  shutil.copytree(directory, target)
  return target


def test_missing_checkpoint(rgb_dir, tmp_path):
  with pytest.raises(ConfigError, match='--checkpoint_path=.*no such checkpoint'):
    evaluate(config(rgb_dir, str(tmp_path / 'model.ckpt-3')))
  with pytest.raises(ConfigError, match='holds no checkpoint'):
    evaluate(config(rgb_dir, str(tmp_path)))


def test_checkpoint_of_another_class_count(rgb_dir, rgb_model, tmp_path):
  """The shared checkpoint with a 5-class logits layer."""
  values = dict(rgb_model[1], global_step=np.array(1, np.int64))
  for name in ('InceptionV1/Logits/Conv3d_0c_1x1/weights',
               'InceptionV1/Logits/Conv3d_0c_1x1/biases'):
    values[name] = np.concatenate([values[name], values[name][..., :2]], axis=-1)
  prefix = vt.write_checkpoint(str(tmp_path / 'model.ckpt-1'), values)
  with pytest.raises(ConfigError, match=r'was trained for 5 classes, but --dataset_dir=.* '
                                        r'has 3$'):
    evaluate(config(rgb_dir, prefix))


def test_checkpoint_of_another_model(rgb_dir, tmp_path):
  prefix = vt.write_checkpoint(str(tmp_path / 'lenet.ckpt-1'), {
      'LeNet/conv1/weights': np.zeros([5, 5, 1, 32], np.float32),
      'global_step': np.array(1, np.int64)})
  with pytest.raises(ConfigError, match='is not a --model_name=i3d checkpoint.*LeNet/conv1'):
    evaluate(config(rgb_dir, prefix))


def test_checkpoint_of_another_width(rgb_dir, rgb_model):
  with pytest.raises(ConfigError, match='differ in shape.*--depth_multiplier'):
    evaluate(config(rgb_dir, rgb_model[0], depth_multiplier=0.25))


def test_records_of_the_wrong_modality(rgb_dir, flow_dir, rgb_model, flow_model):
  with pytest.raises(ConfigError, match=r'takes 2-channel input \(flow\), but '
                                        r'--dataset_dir=.* holds rgb records'):
    evaluate(config(rgb_dir, flow_model[0]))
  with pytest.raises(ConfigError, match=r'--dataset_dir=.* holds flow records; give the rgb'):
    evaluate(config(flow_dir, flow_model[0], fusion=True, flow_checkpoint_path=rgb_model[0],
                    flow_dataset_dir=rgb_dir))
  with pytest.raises(ConfigError, match='--flow_dataset_dir=.* holds rgb records, not flow'):
    evaluate(config(rgb_dir, rgb_model[0], fusion=True, flow_checkpoint_path=flow_model[0],
                    flow_dataset_dir=rgb_dir))


def test_an_empty_split(rgb_dir, rgb_model, tmp_path):
  """What convert_videos writes for a split without videos: one empty shard, size 0."""
  empty = _copy(rgb_dir, tmp_path, 'empty')
  for path in glob.glob(os.path.join(empty, 'test-*')):
    os.remove(path)
  open(os.path.join(empty, 'test-00000-of-00001'), 'wb').close()
  info_path = os.path.join(empty, 'dataset_info.json')
  with open(info_path) as handle:
    info = json.load(handle)
  info['splits']['test'] = 0
  with open(info_path, 'w') as handle:
    json.dump(info, handle)
  with pytest.raises(ConfigError, match='--dataset_dir=.*: the test split holds no videos'):
    evaluate(config(empty, rgb_model[0]))


def test_moving_averages_required_but_absent(rgb_dir, flow_dir, flow_model):
  with pytest.raises(ConfigError, match='--use_moving_averages=true, but '
                                        '--checkpoint_path=.* holds no moving averages'):
    evaluate(config(flow_dir, flow_model[0], use_moving_averages='true'))
  with pytest.raises(ConfigError, match='--use_moving_averages=sometimes is not accepted'):
    evaluate(config(rgb_dir, flow_model[0], use_moving_averages='sometimes'))


@pytest.mark.parametrize('overrides,message', [
    (dict(eval_frames=8, eval_clips=2), '--eval_frames=8 and --eval_clips=2 are not accepted'),
    (dict(eval_frames=8, clip_frames=4), '--clip_frames=4 applies to --eval_clips'),
    (dict(eval_clips=0), '--eval_clips=0 must be >= 1'),
    (dict(log_every_n_batches=0), '--log_every_n_batches=0 must be >= 1'),
    (dict(preprocessing_name='lenet'), '--preprocessing_name=lenet applies to image'),
    (dict(model_name='lenet', depth_multiplier=None), '--model_name=lenet is an image '
     'network, but --dataset_name=video_folder holds rgb videos; use a video network: i3d'),
    (dict(flow_dataset_dir='/x'), 'add --fusion'),
    (dict(fusion=True), '--fusion needs --flow_checkpoint_path'),
    (dict(fusion=True, watch=True), '--fusion with --watch is not supported'),
    (dict(depth_multiplier=-1.0), '--depth_multiplier=-1.0 must be > 0'),
    (dict(use_batch_norm=True), '--use_batch_norm: network .i3d. does not take'),
    (dict(dataset_split_name='validation'), '--dataset_split_name=validation'),
    (dict(gpu_memory_fraction=1.5), r'--gpu_memory_fraction=1.5 must be in \[0, 1\] '
     r'\(0 = no cap\)$'),
])
def test_bad_flags(rgb_dir, rgb_model, overrides, message):
  with pytest.raises(ConfigError, match=message):
    evaluate(config(rgb_dir, rgb_model[0], **overrides))


def test_video_flags_are_refused_for_image_datasets(digits_dir, tmp_path):
  image = EvalConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                     checkpoint_path=placeholder_checkpoint(tmp_path), eval_clips=3)
  with pytest.raises(ConfigError, match='--eval_clips=3 applies to video datasets'):
    evaluate(image)
  with pytest.raises(ConfigError, match='--use_moving_averages=true applies to video'):
    evaluate(dataclasses.replace(image, eval_clips=None, use_moving_averages='true'))
