"""serving.export_model: the SavedModel scores clips exactly as evaluation does, in the
numbered-version layout TF Serving loads.

References: evaluation's own per-video probabilities (evaluation.run), and the clips of
the converted records decoded with Pillow and sampled in NumPy (tests/video_testdata).
"""

import dataclasses
import os
import shutil

import numpy as np
import pytest

from evaluation import run
from datasets.inputs.input_settings import Sampling
from evaluation.config import EvalConfig
from serving import export_model
from serving.export_model import ExportConfig, export_saved_model
from serving.model_info import read_model_info
from tests import video_testdata as vt
from tests.sessions import assert_gpu_options
from tf_compat import tf
from core.params import ConfigError


@pytest.fixture(scope='module')
def rgb_dir(tmp_path_factory):
  return vt.converted(tmp_path_factory, 'rgb')


@pytest.fixture(scope='module')
def rgb_model(tmp_path_factory):
  return vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')


def export_config(rgb_dir, checkpoint, export_dir, **overrides):
  values = dict(checkpoint_path=checkpoint, model_name='i3d', dataset_dir=rgb_dir,
                export_dir=str(export_dir), depth_multiplier=vt.DEPTH,
                eval_image_size=vt.CROP, clip_frames=8)
  values.update(overrides)
  return ExportConfig(**values)


def run_signature(version_dir, clips, convolution_types=None):
  """Loads the version as TF Serving does (tag 'serve', signature 'serving_default');
  adds the types its Conv3D ops compute in to the set `convolution_types`, if given."""
  with tf.Graph().as_default() as graph, tf.Session() as sess:
    meta = tf.saved_model.loader.load(sess, ['serve'], version_dir)
    signature = meta.signature_def['serving_default']
    names = sorted(signature.outputs)
    values = sess.run([signature.outputs[n].name for n in names],
                      {signature.inputs['clips'].name: clips})
    if convolution_types is not None:
      convolution_types.update(op.get_attr('T') for op in graph.get_operations()
                               if op.type == 'Conv3D')
  return dict(zip(names, values))


@pytest.mark.slow
def test_saved_model_probabilities_equal_evaluation(rgb_dir, rgb_model, tmp_path,
                                                    session_configs):
  """One clip of 8 frames per test video: the SavedModel's probabilities for that clip
  equal eval's per-video probabilities within 1e-5 (moving averages in both). The export
  is given GPU options, which reach its session (training's --gpu_allow_growth and
  --gpu_memory_fraction; once a test of its own, test_gpu_options_reach_the_export_session,
  with an export of its own)."""
  prefix, _, _ = rgb_model
  export_dir = str(tmp_path / 'export')
  del session_configs[:]
  result = export_saved_model(export_config(rgb_dir, prefix, export_dir, top_k=2,
                                            gpu_allow_growth=False,
                                            gpu_memory_fraction=0.25))
  assert_gpu_options(session_configs, False, 0.25)
  evaluated = list(run.evaluations(EvalConfig(
      dataset_name='video_folder', dataset_dir=rgb_dir, model_name='i3d',
      checkpoint_path=prefix, depth_multiplier=vt.DEPTH, eval_image_size=vt.CROP,
      clip_frames=8, batch_size=4, num_preprocessing_threads=2)))[0].result.primary
  videos = vt.read_records(rgb_dir)
  clips = np.concatenate([vt.reference_clips(videos[i][1], eval_clips=1, clip_frames=8)
                          for i in evaluated.video_ids])
  assert result.version_dir == os.path.join(export_dir, '1')
  outputs = run_signature(result.version_dir, clips)
  np.testing.assert_allclose(outputs['probabilities'], evaluated.probabilities(),
                             rtol=0, atol=1e-5)
  np.testing.assert_allclose(outputs['logits'], evaluated.logits, rtol=0, atol=1e-4)
  best = np.argsort(-outputs['probabilities'], axis=1, kind='stable')[:, :2]
  assert outputs['top_k_indices'].tolist() == best.tolist()
  names = ['MoveDown', 'MoveLeft', 'MoveRight']
  assert [[n.decode() for n in row] for row in outputs['top_k_labels']] == [
      [names[i] for i in row] for row in best]
  np.testing.assert_allclose(outputs['top_k_probabilities'],
                             np.take_along_axis(outputs['probabilities'], best, 1))

  info = read_model_info(result.version_dir)   # its sampling read back typed
  assert info == dict(result.info, sampling=Sampling(None, 1, 8, vt.CROP))
  assert (info['checkpoint'], info['global_step'], info['moving_averages']) == (prefix, 7, True)
  assert info['input_shape'] == [None, 8, vt.CROP, vt.CROP, 3]  # i3d's pool needs the size
  assert result.info['sampling'] == {'mode': 'eval_clips', 'clips': 1, 'clip_frames': 8,
                                     'crop_size': vt.CROP}   # as written
  assert info['decoding'] == {'short_side': vt.SHORT_SIDE, 'fps': 0.0, 'jpeg_quality': 90}
  with open(os.path.join(result.version_dir, 'assets.extra', 'labels.txt')) as exported, \
      open(os.path.join(rgb_dir, 'labels.txt')) as original:
    assert exported.read() == original.read()


DECOYS = ('notes', '.tmp-7-1', '12abc')   # entries of a models directory TF Serving ignores


@pytest.fixture(scope='module')
def export_of_10_frames(rgb_dir, rgb_model, tmp_path_factory):
  """The shared checkpoint exported with 10-frame clips into a models directory that
  already holds DECOYS: -> (config, result). Read-only: a test that exports again next
  to it copies the directory first."""
  base = tmp_path_factory.mktemp('models_10_frames') / 'models'
  for name in DECOYS:
    (base / name).mkdir(parents=True)
  config = export_config(rgb_dir, rgb_model[0], base, clip_frames=10)
  return config, export_saved_model(config)


@pytest.mark.slow
def test_dynamic_shapes_where_the_net_allows(rgb_model, export_of_10_frames):
  """10-frame clips fill I3D's logits pool in time, so frames are left dynamic, and a
  clip of another length scores as a static graph of that length."""
  _, result = export_of_10_frames
  assert result.info['input_shape'] == [None, None, vt.CROP, vt.CROP, 3]
  clip = np.random.RandomState(1).uniform(-1, 1, [2, 20, vt.CROP, vt.CROP, 3]).astype(
      np.float32)
  expected = vt.reference_logits(rgb_model[2], clip)
  np.testing.assert_allclose(run_signature(result.version_dir, clip)['logits'], expected,
                             rtol=1e-4, atol=1e-4)


def test_bad_input(rgb_dir, rgb_model, tmp_path, tmp_path_factory):
  flow_prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'flow')
  cases = [
      (dict(checkpoint_path=str(tmp_path / 'none')), '--checkpoint_path=.* no such checkpoint'),
      (dict(export_dir=str(tmp_path / 'notes.txt')), '--export_dir=.* is a file'),
      (dict(export_version=-1), '--export_version=-1: a version is a positive integer'),
      (dict(model_name='lenet', depth_multiplier=None), '--model_name=lenet is an image '
                                                        'network'),
      (dict(dataset_dir=str(tmp_path)), '--dataset_dir=.* holds no converted video records'),
      (dict(checkpoint_path=flow_prefix), r'takes 2-channel input \(flow\), but '
                                          r'--dataset_dir=.* holds rgb records'),
      (dict(top_k=0), '--top_k=0 must be >= 1'),
      (dict(gpu_memory_fraction=-0.5), r'--gpu_memory_fraction=-0.5 must be in \[0, 1\]'),
  ]
  (tmp_path / 'notes.txt').write_text('')
  for overrides, message in cases:
    config = export_config(rgb_dir, rgb_model[0], tmp_path / 'export')
    with pytest.raises(ConfigError, match=message):
      export_saved_model(dataclasses.replace(config, **overrides))
  assert not os.path.exists(str(tmp_path / 'export'))


@pytest.mark.slow
def test_versions_are_numbered_written_whole_and_never_overwritten(export_of_10_frames,
                                                                  tmp_path, monkeypatch):
  """1, then 2 beside entries TF Serving ignores; a taken version is refused; a failure
  after the SavedModel is written leaves no version; each version loads as TF Serving
  loads it. The first export (10-frame clips, beside DECOYS) is the module's; the
  directory is copied before the later exports write next to it."""
  shared_config, first = export_of_10_frames
  shared_base = shared_config.export_dir
  assert (first.version, first.version_dir) == (1, os.path.join(shared_base, '1'))
  assert sorted(os.listdir(shared_base)) == sorted(DECOYS + ('1',))
  base = tmp_path / 'models'
  shutil.copytree(shared_base, str(base))
  config = dataclasses.replace(shared_config, export_dir=str(base))
  assert sorted(os.listdir(first.version_dir)) == ['assets.extra', 'saved_model.pb',
                                                   'variables']
  assert sorted(os.listdir(base / '1' / 'variables')) == ['variables.data-00000-of-00001',
                                                          'variables.index']
  assert sorted(os.listdir(base / '1' / 'assets.extra')) == ['labels.txt', 'model_info.json']
  assert export_saved_model(config).version_dir == str(base / '2')
  with pytest.raises(ConfigError, match='--export_version=2: .* already exists'):
    export_saved_model(dataclasses.replace(config, export_version=2))

  written = []

  def fail_after_the_saved_model(directory, info):
    written.append(sorted(os.listdir(directory)))
    raise OSError('No space left on device')
  monkeypatch.setattr(export_model, 'write_model_info', fail_after_the_saved_model)
  with pytest.raises(OSError, match='No space left'):
    export_saved_model(config)
  assert written == [['saved_model.pb', 'variables']]
  assert sorted(os.listdir(base)) == ['.tmp-7-1', '1', '12abc', '2', 'notes']

  clip = np.zeros([1, 10, vt.CROP, vt.CROP, 3], np.float32)
  np.testing.assert_allclose(run_signature(str(base / '2'), clip)['logits'],
                             run_signature(str(base / '1'), clip)['logits'], rtol=0, atol=0)


# GPU options reaching the export session: asserted on the export of
# test_saved_model_probabilities_equal_evaluation (no growth, 0.25), not an export of its own.


@pytest.mark.slow
def test_bfloat16_export_and_evaluation_give_float32_outputs_close_to_float32(
    rgb_dir, rgb_model, tmp_path):
  """export.py and eval.py with --mixed_precision=bfloat16 (float16 has no CPU kernels for
  I3D's 3-D pools): the SavedModel computes its convolutions in bfloat16, takes and gives
  float32, and both score the test videos' clips like float32 I3D loaded from the same
  weights (the moving averages). Tolerance: 5% of the largest float32 logit (bfloat16
  keeps 8 significant bits; seen here: about 1%)."""
  prefix, _, shadows = rgb_model
  result = export_saved_model(export_config(rgb_dir, prefix, tmp_path / 'export',
                                            mixed_precision='bfloat16'))
  evaluated = list(run.evaluations(EvalConfig(
      dataset_name='video_folder', dataset_dir=rgb_dir, model_name='i3d',
      checkpoint_path=prefix, depth_multiplier=vt.DEPTH, eval_image_size=vt.CROP,
      clip_frames=8, batch_size=9, num_preprocessing_threads=2,
      mixed_precision='bfloat16')))[0].result.primary
  videos = vt.read_records(rgb_dir)
  clips = np.concatenate([vt.reference_clips(videos[i][1], eval_clips=1, clip_frames=8)
                          for i in evaluated.video_ids])
  expected = vt.reference_logits(shadows, clips)
  tolerance = 0.05 * np.abs(expected).max()
  convolutions = set()   # read off the graph the SavedModel was loaded into to score
  outputs = run_signature(result.version_dir, clips, convolutions)
  assert outputs['logits'].dtype == outputs['probabilities'].dtype == np.float32
  np.testing.assert_allclose(outputs['logits'], expected, rtol=0, atol=tolerance)
  np.testing.assert_allclose(evaluated.logits, expected, rtol=0, atol=tolerance)
  assert result.info['mixed_precision'] == 'bfloat16'
  assert convolutions == {tf.bfloat16}
