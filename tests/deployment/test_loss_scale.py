"""deployment.loss_scale: float16 dynamic loss scaling with clones and sync replicas.

The model is w in R^2 computed in float16 (float32 variable, deployment.precision's
getter); clone c's loss is boost_c * |x_c * w - t_c|^2 with values exact in float16, so
the update has a closed form in NumPy: the gradient of clone c is 2 x_c (x_c w - t_c).
An overflow is injected by feeding boost_c = 1e9: the scaled gradient does not fit in
float16 and becomes inf. With synchronous replicas: tests/deployment/test_sync_replicas.py
(it shares that module's cluster).
"""

import numpy as np
from deployment import model_deploy
from deployment.loss_scale import (DynamicLossScale, LossScaleOptimizer,
                                   SkipNonFiniteUpdates, all_finite)
from deployment.precision import float32_variables
from deployment.session.session_config import make_session_config
from tf_compat import tf

X = np.array([[1.0, 0.5], [2.0, -1.0]], np.float32)       # per clone
T = np.array([[0.25, 1.0], [-0.5, 0.75]], np.float32)
W0 = np.array([0.5, -0.25], np.float32)
RATE, MOMENTUM, SCALE = 0.125, 0.5, 1024.0
OVERFLOW = 1e9


def _gradient(w, clones=(0, 1)):
  """The mean over `clones` of d|x w - t|^2 / dw, in float64."""
  return np.mean([2 * X[c] * (X[c] * w - T[c]) for c in clones], axis=0)


class TwoClones:
  """The model on 2 CPU clones with momentum, through model_deploy.deploy."""

  def __init__(self, growth_steps=0, initial_scale=SCALE):
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.boost = [tf.placeholder_with_default(1.0, [], 'boost_%d' % c) for c in range(2)]
      config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
      self.scale = DynamicLossScale(initial_scale, growth_steps)
      optimizer = LossScaleOptimizer(SkipNonFiniteUpdates(
          tf.train.MomentumOptimizer(RATE, MOMENTUM), self.scale), self.scale)
      clone_index = iter(range(2))

      def clone_fn():
        c = next(clone_index)
        with float32_variables(tf.float16):
          w = tf.get_variable('w', dtype=tf.float16, initializer=W0.astype(np.float16))
          error = tf.constant(X[c], tf.float16) * w - tf.constant(T[c], tf.float16)
        tf.losses.add_loss(self.boost[c] * tf.cast(tf.reduce_sum(tf.square(error)),
                                                   tf.float32))
      self.train_op = model_deploy.deploy(config, clone_fn, optimizer=optimizer).train_op
      self.w = tf.global_variables('w')[0]
      self.slot = optimizer.get_slot(self.w, 'momentum')
      self.global_step = tf.train.get_global_step()
      init = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
    self.sess = tf.Session(graph=self.graph, config=make_session_config(config))
    self.sess.run(init)

  def step(self, overflow_clone=None):
    feed = {} if overflow_clone is None else {self.boost[overflow_clone]: OVERFLOW}
    self.sess.run(self.train_op, feed)

  def state(self):
    return self.sess.run({'w': self.w, 'slot': self.slot, 'step': self.global_step,
                          'scale': self.scale.scale, 'skipped': self.scale.skipped_steps,
                          'overflows': self.scale.overflow_steps,
                          'good': self.scale.good_steps})


def test_variables_are_float32_and_the_update_is_the_unscaled_mean_gradient():
  model = TwoClones()
  assert model.w.dtype.base_dtype == tf.float32 and model.w.op.name == 'w'
  model.step()
  model.step()
  state = model.state()
  w, accumulation = W0.astype(np.float64), np.zeros(2)
  for _ in range(2):
    accumulation = MOMENTUM * accumulation + _gradient(w)
    w = w - RATE * accumulation
  np.testing.assert_allclose(state['w'], w, rtol=1e-3)
  np.testing.assert_allclose(state['slot'], accumulation, rtol=1e-3)
  assert (state['step'], state['scale'], state['skipped'], state['overflows']) == (
      2, SCALE, 0, 0)


def test_an_overflow_in_one_clone_skips_the_update_and_halves_the_scale():
  model = TwoClones()
  model.step()
  before = model.state()
  model.step(overflow_clone=1)
  after = model.state()
  np.testing.assert_array_equal(after['w'], before['w'])        # no weight moved
  np.testing.assert_array_equal(after['slot'], before['slot'])  # nor the momentum
  assert after['step'] == before['step'] + 1                    # the step still counts
  assert (after['scale'], after['skipped'], after['overflows'], after['good']) == (
      SCALE / 2, 1, 1, 0)
  model.step()  # Finite again: applied from where the weights were.
  accumulation = MOMENTUM * before['slot'] + _gradient(before['w'].astype(np.float64))
  np.testing.assert_allclose(model.state()['w'], before['w'] - RATE * accumulation,
                             rtol=1e-3)


def test_the_scale_doubles_after_growth_steps_and_never_falls_below_one():
  model = TwoClones(growth_steps=2)
  model.step()
  assert (model.state()['scale'], model.state()['good']) == (SCALE, 1)
  model.step()
  assert (model.state()['scale'], model.state()['good']) == (2 * SCALE, 0)
  low = TwoClones(initial_scale=1.0)
  low.step(overflow_clone=0)
  low.step(overflow_clone=0)
  assert (low.state()['scale'], low.state()['skipped']) == (1.0, 2)


def test_all_finite_sees_inf_and_nan_in_dense_and_sparse_gradients():
  with tf.Graph().as_default(), tf.Session() as sess:
    dense = tf.constant([1.0, 2.0])
    sparse = tf.IndexedSlices(tf.constant([[np.nan]]), tf.constant([0]))
    assert sess.run(all_finite([dense, None]))
    assert not sess.run(all_finite([dense, sparse]))
    assert not sess.run(all_finite([tf.constant([np.inf])]))
