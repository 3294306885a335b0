"""training/precise_bn.py against an independent NumPy reference, and --precise_bn_batches
through the trainer.

The reference net: 6x6x2 inputs, a 3x3 convolution with fused batch norm (its training
update averages the unbiased batch variance) and ReLU, then a 3x3 convolution with
non-fused batch norm (tf.nn.moments: the biased variance). NumPy recomputes each clone's
forward pass in training mode (each clone normalised by its own batch, as the clones
train) from the same weights and batches, and the statistics of the pre-batch-norm
activations over the global batch, averaged over the N batches. One clone of batch 2b and
two of b see the same global batches: the first layer, whose input no batch norm has
touched, gets the same statistics either way; deeper layers cannot (their inputs were
normalised per clone), and the reference computes them per clone too.
"""

import os
import threading

import numpy as np
import pytest

from deployment import model_deploy
from deployment.session import session_config
from training import precise_bn
from tf_compat import tf, slim
from training import train as train_module
from training.config import TrainConfig
from training.precise_bn import PreciseBatchNorm, global_statistics
from training.input_position import is_input_position

BATCH, NUM_BATCHES, EPSILON = 4, 3, 0.001
CHANNELS = (2, 4, 3)


def test_global_statistics_are_those_of_the_union_of_the_clone_batches():
  values = np.random.RandomState(0).normal(3.0, 2.0, size=(3, 50, 4))  # clones of 50
  means, variances = values.mean(axis=1), values.var(axis=1)
  for unbiased in (False, True):
    mean, variance = global_statistics(means, variances, [50] * 3, unbiased)
    union = values.reshape(-1, 4)
    np.testing.assert_allclose(mean, union.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(variance, union.var(axis=0, ddof=int(unbiased)), rtol=1e-12)


def _net(images):
  """-> [conv1 pre-BN, conv2 pre-BN] are found by precise_bn from the update ops."""
  with slim.arg_scope([slim.batch_norm], is_training=True, decay=0.9, epsilon=EPSILON):
    net = slim.conv2d(images, CHANNELS[1], [3, 3], padding='VALID', scope='conv1',
                      normalizer_fn=slim.batch_norm, normalizer_params={'fused': True})
    net = slim.conv2d(net, CHANNELS[2], [3, 3], padding='VALID', scope='conv2',
                      activation_fn=None, normalizer_fn=slim.batch_norm,
                      normalizer_params={'fused': False})
  return net


def _images(seed=1):
  """The global batches, [NUM_BATCHES * 2 * BATCH, 6, 6, 2], not centred."""
  return np.random.RandomState(seed).normal(
      1.5, 2.0, size=(NUM_BATCHES * 2 * BATCH, 6, 6, CHANNELS[0])).astype(np.float32)


def _run_precise_bn(num_clones, images):
  """Builds the net on `num_clones` CPU clones drawing 2 * BATCH / num_clones examples
  each, runs precise BN; -> (values before, values after) of every global variable."""
  with tf.Graph().as_default():
    tf.set_random_seed(2)
    config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
    batches = tf.data.Dataset.from_tensor_slices(images).batch(2 * BATCH // num_clones)
    iterator = tf.data.make_one_shot_iterator(batches)

    def model_fn():
      tf.losses.add_loss(tf.reduce_mean(_net(iterator.get_next())))
    clones = model_deploy.create_clones(config, model_fn)
    ema = tf.train.ExponentialMovingAverage(0.5)
    ema.apply(slim.get_model_variables())
    precise = PreciseBatchNorm(clones, NUM_BATCHES)
    variables = tf.global_variables()
    with tf.Session(config=session_config.make_session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      for beta in [v for v in variables if v.op.name.endswith('/beta')]:
        beta.load(np.random.RandomState(3).normal(size=beta.shape), sess)
      before = dict(zip([v.op.name for v in variables], sess.run(variables)))
      precise.run(sess)
      after = dict(zip([v.op.name for v in variables], sess.run(variables)))
  assert [(layer.name, layer.unbiased, len(layer.inputs)) for layer in precise.layers] == [
      ('conv1/BatchNorm', True, num_clones), ('conv2/BatchNorm', False, num_clones)]
  return before, after


def _conv(inputs, weights):
  """VALID 3x3 convolution, NHWC, HWIO weights."""
  windows = np.lib.stride_tricks.sliding_window_view(inputs, (3, 3), axis=(1, 2))
  return np.einsum('bhwcij,ijco->bhwo', windows, weights)


def _reference(values, images, num_clones):
  """{layer: (moving mean, moving variance)} from NumPy forward passes, float64."""
  w1, w2 = (values['conv%d/weights' % i].astype(np.float64) for i in (1, 2))
  beta1 = values['conv1/BatchNorm/beta'].astype(np.float64)
  sums = {'conv1': [0.0, 0.0], 'conv2': [0.0, 0.0]}
  for batch in np.split(images.astype(np.float64), NUM_BATCHES):
    first, second = [], []
    for clone_batch in np.split(batch, num_clones):
      pre1 = _conv(clone_batch, w1)
      mean, variance = pre1.mean(axis=(0, 1, 2)), pre1.var(axis=(0, 1, 2))
      hidden = np.maximum(0.0, (pre1 - mean) / np.sqrt(variance + EPSILON) + beta1)
      first.append(pre1.reshape(-1, CHANNELS[1]))
      second.append(_conv(hidden, w2).reshape(-1, CHANNELS[2]))
    for layer, pre, ddof in (('conv1', first, 1), ('conv2', second, 0)):
      union = np.concatenate(pre)
      sums[layer][0] = sums[layer][0] + union.mean(axis=0)
      sums[layer][1] = sums[layer][1] + union.var(axis=0, ddof=ddof)
  return {layer: (mean / NUM_BATCHES, variance / NUM_BATCHES)
          for layer, (mean, variance) in sums.items()}


@pytest.fixture(scope='module')
def runs():
  images = _images()
  return images, {clones: _run_precise_bn(clones, images) for clones in (1, 2)}


@pytest.mark.parametrize('num_clones', [1, 2])
def test_the_statistics_are_numpys_over_the_global_batches(runs, num_clones):
  images, results = runs
  before, after = results[num_clones]
  expected = _reference(before, images, num_clones)
  for layer, (mean, variance) in expected.items():
    np.testing.assert_allclose(after[layer + '/BatchNorm/moving_mean'], mean,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(after[layer + '/BatchNorm/moving_variance'], variance,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('num_clones', [1, 2])
def test_only_the_moving_statistics_and_their_shadows_change(runs, num_clones):
  _, results = runs
  before, after = results[num_clones]
  moving = ('/moving_mean', '/moving_variance')
  changed = sorted(name for name in before if before[name].tobytes() != after[name].tobytes())
  assert changed == sorted(name for name in before if name.endswith(moving) or any(
      name.endswith(m + '/ExponentialMovingAverage') for m in moving))
  for name in changed:
    if name.endswith('/ExponentialMovingAverage'):
      assert after[name].tobytes() == after[name[:-len('/ExponentialMovingAverage')]].tobytes()


def test_two_clones_give_the_first_layer_the_statistics_of_one_clone_of_the_global_batch(
    runs):
  _, results = runs
  for name in ('conv1/BatchNorm/moving_mean', 'conv1/BatchNorm/moving_variance'):
    np.testing.assert_allclose(results[2][1][name], results[1][1][name], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.slow
def test_the_trainer_recomputes_the_statistics_once_before_the_one_final_checkpoint(
    digits_dir, tmp_path, monkeypatch, caplog):
  """LeNet with batch norm, 2 clones, a checkpoint due at every step: the last step is
  not saved before precise BN, which changes only the moving statistics, and the final
  checkpoint holds its result; the log counts the batches, flags.cfg records the flag."""
  caplog.set_level('INFO', logger='absl')
  seen = {}
  original = PreciseBatchNorm.run

  def spying_run(self, sess, beat=lambda: None):
    variables = tf.global_variables()
    seen['before'] = dict(zip([v.op.name for v in variables], sess.run(variables)))
    seen['files'] = sorted(os.listdir(str(train_dir)))
    original(self, sess, beat)
    seen['after'] = dict(zip([v.op.name for v in variables], sess.run(variables)))
  monkeypatch.setattr(precise_bn.PreciseBatchNorm, 'run', spying_run)
  train_dir = tmp_path / 'train'
  result = train_module.train(TrainConfig(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      train_dir=str(train_dir), use_batch_norm=True, batch_norm_decay=0.9,
      precise_bn_batches=4, num_clones=2, clone_on_cpu=True, batch_size=16,
      max_number_of_steps=3, save_interval_steps=1, optimizer='sgd', num_readers=1,
      num_preprocessing_threads=1))
  assert 'model.ckpt-2.index' in seen['files'] and 'model.ckpt-3.index' not in seen['files']
  moving = ('/moving_mean', '/moving_variance')
  changed = [n for n in seen['before']
             if seen['before'][n].tobytes() != seen['after'][n].tobytes()]
  assert changed and all(name.endswith(moving) for name in changed)
  assert len(changed) == 2 * 3  # conv1, conv2, fc3 of LeNet with batch norm
  saved = tf.train.load_checkpoint(result.checkpoint)
  assert result.checkpoint.endswith('model.ckpt-3')
  for name in saved.get_variable_to_shape_map():
    if is_input_position(name):  # Not a variable (training.input_position).
      continue
    assert saved.get_tensor(name).tobytes() == np.asarray(seen['after'][name]).tobytes()
  assert any('moving mean and variance of 3 layers recomputed with the final weights over '
             '4 training batches of 32 examples' in r.getMessage() for r in caplog.records)
  with open(str(train_dir / 'flags.cfg')) as handle:
    assert '--precise_bn_batches=4' in handle.read().splitlines()


@pytest.mark.slow
def test_a_stopped_run_keeps_the_moving_averages_and_says_so(digits_dir, tmp_path, caplog):
  caplog.set_level('INFO', logger='absl')
  stop = threading.Event()
  stop.set()  # a SIGTERM right after start
  train_module.train(TrainConfig(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      train_dir=str(tmp_path / 'train'), use_batch_norm=True, precise_bn_batches=4,
      batch_size=8, num_readers=1, num_preprocessing_threads=1), stop_event=stop)
  assert any(r.getMessage().startswith('Precise batch norm (--precise_bn_batches=4) not '
                                       'run: training was stopped before its end')
             for r in caplog.records)
  assert not any('recomputed with the final weights' in r.getMessage()
                 for r in caplog.records)
