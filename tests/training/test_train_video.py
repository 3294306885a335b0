"""Training on video clips: the setup rules for video data and net flags, real I3D runs.

The data are tests/video_testdata.py's converted synthetic videos (32-short-side records),
the network a narrow I3D (depth 0.125) on 4x32x32 clips, so a run takes seconds.
References are independent of the code under test: the finished clips are recomputed in
NumPy from the uint8 clips and flip bits, devices are read off the built graph, and
training results are read back from the checkpoint.
"""

import dataclasses

import numpy as np
import pytest

from deployment.session.session_config import make_session_config
from nets import i3d_checkpoints
from tests import video_testdata
from tf_compat import tf
from training import train as train_module
from training.config import TrainConfig
from core.params import ConfigError
from training.setup import check_train_config


@pytest.fixture(scope='module')
def rgb_dir(tmp_path_factory):
  return video_testdata.converted(tmp_path_factory, 'rgb')


@pytest.fixture(scope='module')
def flow_dir(tmp_path_factory):
  return video_testdata.converted(tmp_path_factory, 'flow')


def video_config(dataset_dir, train_dir, **overrides):
  values = dict(
      dataset_name='video_folder', dataset_dir=dataset_dir, model_name='i3d',
      train_dir=str(train_dir), num_clones=2, clone_on_cpu=True, batch_size=2,
      clip_frames=4, train_image_size=32, depth_multiplier=video_testdata.DEPTH,
      max_number_of_steps=3, optimizer='sgd', learning_rate=0.01,
      learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
      log_every_n_steps=1, save_summaries_secs=600, save_interval_secs=600)
  values.update(overrides)
  return TrainConfig(**values)


def test_video_setup_resolves_clips(rgb_dir, tmp_path):
  setup = check_train_config(video_config(rgb_dir, tmp_path, clip_frames=None,
                                          dropout_keep_prob=0.5))
  assert setup.input_settings.clip_frames == 64  # i3d's registered default
  assert setup.input_settings.image_size == 32
  assert setup.dataset.modality == 'rgb'
  assert setup.network.net_kwargs == {'depth_multiplier': video_testdata.DEPTH,
                                  'dropout_keep_prob': 0.5}


def test_image_setup_has_no_clips(digits_dir, tmp_path):
  setup = check_train_config(TrainConfig(dataset_name='digits', dataset_dir=digits_dir,
                                         model_name='lenet', train_dir=str(tmp_path)))
  assert setup.input_settings.clip_frames is None and setup.network.net_kwargs == {}


@pytest.mark.parametrize('changes, message', [
    (dict(model_name='lenet', clip_frames=None, depth_multiplier=None),
     '--model_name=lenet is an image network, but --dataset_name=video_folder holds rgb '
     'videos; use a video network: i3d'),
    (dict(preprocessing_name='lenet'), '--preprocessing_name=lenet is for image datasets'),
    (dict(clip_frames=0), '--clip_frames=0 must be >= 1'),
    (dict(depth_multiplier=0.0), '--depth_multiplier=0.0 must be > 0'),
    (dict(dropout_keep_prob=1.5), r'--dropout_keep_prob=1.5 must be in \(0, 1\]'),
])
def test_video_rules(rgb_dir, tmp_path, changes, message):
  with pytest.raises(ConfigError, match=message):
    check_train_config(video_config(rgb_dir, tmp_path, **changes))


@pytest.mark.parametrize('changes, message', [
    (dict(model_name='i3d'), r'--model_name=i3d takes video clips, but --dataset_name=digits '
                             r'holds images; use an image network \(.*lenet.*\) or a video '
                             r'dataset \(hmdb51, ucf101, video_folder\)'),
    (dict(clip_frames=8), '--clip_frames is for video datasets'),
    (dict(repeat_first_frame=True), '--repeat_first_frame is for video datasets'),
    (dict(random_flip=False), '--norandom_flip is for video datasets'),
    (dict(depth_multiplier=0.5), "--model_name=lenet: network 'lenet' does not take "
                                 "depth_multiplier"),
    (dict(model_name='cifarnet', batch_norm_decay=0.9),
     "--model_name=cifarnet: network 'cifarnet' has no batch_norm_decay"),
])
def test_image_rules(digits_dir, tmp_path, changes, message):
  config = TrainConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                       train_dir=str(tmp_path))
  with pytest.raises(ConfigError, match=message):
    check_train_config(dataclasses.replace(config, **changes))


@pytest.fixture(scope='module')
def training_graphs(rgb_dir, flow_dir, tmp_path_factory):
  """graph_of(modality): (setup, graph) of video_config's training graph (2 clones), built
  at most once per modality for the module's tests, which read it and run sessions of
  their own on it."""
  built = {}

  def graph_of(modality):
    if modality not in built:
      setup = check_train_config(video_config(
          rgb_dir if modality == 'rgb' else flow_dir, tmp_path_factory.mktemp(modality)))
      with tf.Graph().as_default() as graph:
        train_module.build_training_graph(setup)
      built[modality] = setup, graph
    return built[modality]
  return graph_of


@pytest.mark.parametrize('modality', ['rgb', 'flow'])
def test_clones_finish_their_clips_on_their_own_device(modality, training_graphs):
  """Clips leave the input device as uint8; each clone scales and flips on its device,
  and the network sees exactly NumPy's finished clips."""
  setup, graph = training_graphs(modality)
  with graph.as_default():
    casts = [op for op in graph.get_operations()
             if op.type == 'Cast' and op.inputs[0].dtype == tf.uint8
             and op.name.startswith('clone_')]
    assert sorted(op.name.split('/')[0] for op in casts) == ['clone_0', 'clone_1']
    for op in casts:
      assert op.device.endswith('CPU:%s' % op.name.split('/')[0][-1])
    raw = graph.get_operation_by_name('clone_0/IteratorGetNext').outputs
    assert raw[0].dtype == tf.uint8 and raw[2].dtype == tf.bool
    finished = graph.get_operation_by_name(
        'clone_0/InceptionV1/Conv3d_1a_7x7/Conv3D').inputs[0]
    with tf.Session(config=make_session_config(setup.deploy_config)) as sess:
      sess.run(tf.global_variables_initializer())
      clips, flips, output = sess.run([raw[0], raw[2], finished])
  expected = clips / 127.5 - 1.0
  expected[flips] = expected[flips][:, :, :, ::-1]
  if modality == 'flow':
    expected[flips, ..., 0] *= -1
  # One fetch: the clips, the flips and the finished clips come from the same batch.
  np.testing.assert_allclose(output, expected, rtol=0, atol=1e-6)
  assert output.shape == (2, 4, 32, 32, 3 if modality == 'rgb' else 2)


def check_two_clone_run(result, steps, channels):
  """A finished 2-clone run of video_config: its steps, a finite loss, and a checkpoint of
  the one model (no clone_ copies) taking `channels`-channel clips to NUM_CLASSES."""
  assert result.global_step == steps
  assert np.isfinite(result.loss)
  reader = tf.train.load_checkpoint(result.checkpoint)
  shapes = reader.get_variable_to_shape_map()
  first = 'InceptionV1/Conv3d_1a_7x7/weights'
  assert shapes[first][3] == channels
  assert shapes['InceptionV1/Logits/Conv3d_0c_1x1/biases'] == [video_testdata.NUM_CLASSES]
  assert not any(name.startswith('clone_') for name in shapes)


# rgb: the same checks on the same configuration's run (video_config, 2 clones, rgb) in
# tests/training/test_tensorboard_server.py::
# test_tensorboard_serves_every_clone_loss_the_input_wait_and_the_clips.
@pytest.mark.slow
def test_i3d_trains_on_flow_clips_with_two_clones(flow_dir, tmp_path):
  result = train_module.train(video_config(flow_dir, tmp_path / 'train'))
  check_two_clone_run(result, steps=3, channels=2)


@pytest.mark.slow
def test_repeat_first_frame_trains(rgb_dir, tmp_path):
  result = train_module.train(video_config(rgb_dir, tmp_path / 'train', num_clones=1,
                                           repeat_first_frame=True, max_number_of_steps=2))
  assert result.global_step == 2 and np.isfinite(result.loss)


def deepmind_checkpoint(prefix, stream, channels, num_classes=400):
  """A checkpoint with DeepMind's exact naming and layout for a narrow I3D.

  Names come from nets.i3d_checkpoints' table; batch-norm vectors are stored as Sonnet
  stores them, [1, 1, 1, 1, C]. Returns (prefix, {our variable name: value}).
  """
  ours = video_testdata.i3d_values(channels, num_classes=num_classes)
  stored = {}
  for name, value in ours.items():
    theirs = i3d_checkpoints.slim_to_deepmind_name(name, stream)
    stored[theirs] = value.reshape([1, 1, 1, 1, -1]) if '/batch_norm/' in theirs else value
  return video_testdata.write_checkpoint(prefix, stored), ours


@pytest.fixture(scope='module')
def rgb_deepmind_checkpoint(tmp_path_factory):
  """(prefix, ours) of DeepMind's rgb stream layout (400 classes), made once for the
  module; read-only (a run restores from it, never writes next to it)."""
  return deepmind_checkpoint(str(tmp_path_factory.mktemp('rgb_imagenet') / 'model.ckpt'),
                             'RGB/inception_i3d', channels=3)


@pytest.mark.slow
def test_fine_tune_from_a_deepmind_checkpoint_without_its_logits(
    rgb_dir, rgb_deepmind_checkpoint, tmp_path):
  prefix, ours = rgb_deepmind_checkpoint
  config = video_config(rgb_dir, tmp_path / 'train', num_clones=1, max_number_of_steps=1,
                        learning_rate=1e-12, checkpoint_path=prefix,
                        checkpoint_exclude_scopes=('InceptionV1/Logits',))
  result = train_module.train(config)
  reader = tf.train.load_checkpoint(result.checkpoint)
  restored = [name for name in ours if not name.startswith('InceptionV1/Logits')
              and 'moving_' not in name]  # one step of training moves the statistics
  assert len(restored) > 100
  for name in restored:
    np.testing.assert_allclose(reader.get_tensor(name), ours[name], rtol=0, atol=1e-6,
                               err_msg=name)
  # The 3-way head is new: not the checkpoint's 400-way one.
  assert reader.get_tensor('InceptionV1/Logits/Conv3d_0c_1x1/biases').shape == (3,)


def test_deepmind_checkpoint_of_the_other_modality_is_refused(rgb_dir, tmp_path):
  prefix, _ = deepmind_checkpoint(str(tmp_path / 'flow_imagenet' / 'model.ckpt'),
                                  'Flow/inception_i3d', channels=2)
  config = video_config(rgb_dir, tmp_path / 'train', checkpoint_path=prefix,
                        checkpoint_exclude_scopes=('InceptionV1/Logits',))
  with pytest.raises(ConfigError, match='--checkpoint_path=.*flow.* rgb') as error:
    check_train_config(config)
  assert '\n' not in str(error.value)


def test_deepmind_logits_need_excluding_for_another_class_count(
    rgb_dir, rgb_deepmind_checkpoint, tmp_path):
  prefix, _ = rgb_deepmind_checkpoint
  # One clone: the check reads the model's variables, which clones share (half the graph).
  config = video_config(rgb_dir, tmp_path / 'train', num_clones=1, checkpoint_path=prefix)
  setup = check_train_config(config)
  with tf.Graph().as_default(), pytest.raises(
      ConfigError, match=r'differ in shape .* InceptionV1/Logits/Conv3d_0c_1x1/\w+ is '
                         r'\[.*3\] in the model .*checkpoint_exclude_scopes'):
    train_module.build_training_graph(setup)


def test_the_video_step_has_no_integer_transpose_for_onednn_to_refuse(training_graphs):
  """oneDNN's layout pass prints an ERROR line ('oneDNN supports DT_UINT8 only on
  platforms with AVX-512'), on any CPU, for a Transpose of any dtype but floats: the clip
  montages' label strips once had one (datasets/inputs/label_strip.py). video_config logs
  every step, so its summaries, the montages among them, run every step
  (--save_summaries_steps resolves to 1; the graph holds them whatever the cadence)."""
  setup, graph = training_graphs('rgb')
  assert setup.save_summaries_steps == 1
  integer_transposes = [op.name for op in graph.get_operations()
                        if op.type in ('Transpose', 'ConjugateTranspose')
                        and not op.get_attr('T').is_floating]
  assert integer_transposes == []
