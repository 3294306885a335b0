"""deployment.accumulation: K micro-batches per update inside one session.run.

References are independent of the code under test: plain model_deploy runs of the big
batch (K = 1), NumPy gradients of a linear model, NumPy moving averages, and the trace of
an executed step (which ops ran when).
"""

import numpy as np
import pytest

from deployment import accumulation, model_deploy
from deployment.session import session_config
from deployment.model_deploy import DeploymentConfig
from tf_compat import tf, slim

IN_DIM, HIDDEN, OUT_DIM = 4, 5, 3
GLOBAL_BATCH = 12
STEPS = 4
CPU = DeploymentConfig(clone_on_cpu=True)


def cpu_session(config):
  return tf.Session(config=session_config.make_session_config(config))


def relative(a, b):
  return np.linalg.norm(a - b) / np.linalg.norm(b)


def flat(values):
  return np.concatenate([values[name].ravel() for name in sorted(values)])


def mlp_data():
  rng = np.random.RandomState(7)
  return (rng.randn(STEPS, GLOBAL_BATCH, IN_DIM).astype(np.float32),
          rng.randn(STEPS, GLOBAL_BATCH, OUT_DIM).astype(np.float32))


def train_mlp(num_clones, num_micro_batches, trace=False):
  """STEPS SGD steps of a tanh MLP at the global batch GLOBAL_BATCH, split over clones
  and micro-batches. Each model_fn call draws the next slice from one iterator, as the
  trainer does: which clone gets which slice of a step does not change the step's mean
  gradient. -> (start, final, global step, the first step's trace or None)."""
  per_clone = GLOBAL_BATCH // (num_clones * num_micro_batches)
  inputs, targets = mlp_data()
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)

  with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensor_slices((inputs.reshape(-1, IN_DIM),
                                                  targets.reshape(-1, OUT_DIM)))
    iterator = tf.data.make_one_shot_iterator(dataset.batch(per_clone))

    def model_fn():
      x, y = iterator.get_next()
      net = slim.fully_connected(x, HIDDEN, activation_fn=tf.tanh, scope='fc1',
                                 weights_initializer=tf.constant_initializer(0.4),
                                 biases_initializer=tf.constant_initializer(0.1))
      net = slim.fully_connected(net, OUT_DIM, activation_fn=None, scope='fc2',
                                 weights_initializer=tf.constant_initializer(-0.3))
      tf.losses.mean_squared_error(y, net)

    model = accumulation.deploy(config, model_fn, num_micro_batches=num_micro_batches,
                                optimizer=tf.train.GradientDescentOptimizer(0.5))
    variables = {v.op.name: v for v in tf.trainable_variables()}
    global_step = tf.train.get_global_step()
    metadata = tf.RunMetadata()
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      start = sess.run(variables)
      for step in range(STEPS):
        traced = trace and step == 0
        sess.run(model.train_op, run_metadata=metadata if traced else None,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
                 if traced else None)
      return start, sess.run(variables), sess.run(global_step), metadata if trace else None


@pytest.fixture(scope='module')
def big_batch():
  """The reference: one clone, one micro-batch of GLOBAL_BATCH."""
  return train_mlp(1, 1)


@pytest.mark.parametrize('num_clones, num_micro_batches', [(1, 2), (2, 2), (1, 3)])
def test_micro_batches_update_like_one_big_batch(big_batch, num_clones,
                                                 num_micro_batches):
  start, reference, _, _ = big_batch
  start_k, final, global_step, _ = train_mlp(num_clones, num_micro_batches)
  assert global_step == STEPS          # One update, one global step, per run.
  assert relative(flat(start_k), flat(start)) == 0
  assert relative(flat(start), flat(reference)) > 1e-2    # Training moved the weights.
  assert relative(flat(final), flat(reference)) <= 1e-5


def _times(metadata):
  """{node name: (start, end) in microseconds} of an executed step."""
  times = {}
  for device in metadata.step_stats.dev_stats:
    for node in device.node_stats:
      times[node.node_name] = (node.all_start_micros,
                               node.all_start_micros + node.all_end_rel_micros)
  return times


@pytest.mark.parametrize('num_clones', [1, 2])
def test_micro_batches_run_one_after_another(num_clones):
  """Micro-batch 1's forward pass (its batch drawn first) starts after micro-batch 0's
  backward pass has ended, so the activations of the two never take memory at once. (Its
  backward pass needs its forward; only constants of its gradient may run earlier.)"""
  _, _, _, metadata = train_mlp(num_clones, 2, trace=True)
  times = _times(metadata)
  second = accumulation.micro_batch_scope(1) + '/'
  backward_0 = [end for name, (_, end) in times.items()
                if 'gradients' in name.split('/') and not name.startswith(second)]
  forward_1 = [start for name, (start, _) in times.items()
               if name.startswith(second) and 'gradients' not in name.split('/')]
  assert any(name.startswith(second) and name.endswith('IteratorGetNext') for name in times)
  assert len(backward_0) > 5 and len(forward_1) > 5
  assert min(forward_1) >= max(backward_0)


def test_update_is_the_mean_gradient_with_regularization_once():
  """A linear model, 2 micro-batches of 3 rows, L2 on w: one SGD step against NumPy."""
  rng = np.random.RandomState(3)
  x = rng.randn(6, 4).astype(np.float32)
  y = rng.randn(6, 1).astype(np.float32)
  w0 = rng.randn(4, 1).astype(np.float32)
  scale, rate = 0.3, 0.1
  rows = iter([x[:3], x[3:]])
  targets = iter([y[:3], y[3:]])

  def model_fn():
    w = tf.get_variable('w', initializer=w0,
                        regularizer=lambda v: scale * tf.reduce_sum(tf.square(v)))
    tf.losses.mean_squared_error(tf.constant(next(targets)),
                                 tf.matmul(tf.constant(next(rows)), w))

  config = CPU
  with tf.Graph().as_default():
    model = accumulation.deploy(config, model_fn, num_micro_batches=2,
                                optimizer=tf.train.GradientDescentOptimizer(rate))
    [w] = tf.trainable_variables()
    with cpu_session(config) as sess:
      sess.run(tf.global_variables_initializer())
      loss = sess.run(model.train_op)
      w1 = sess.run(w)
  x64, y64, w64 = x.astype(np.float64), y.astype(np.float64), w0.astype(np.float64)
  residual = x64 @ w64 - y64
  data_loss = np.mean(residual ** 2)   # The mean of two means over 3 rows each.
  grad = 2 * x64.T @ residual / 6 + 2 * scale * w64
  np.testing.assert_allclose(loss, data_loss + scale * np.sum(w64 ** 2), rtol=1e-5)
  np.testing.assert_allclose(w1, w64 - rate * grad, rtol=1e-5, atol=1e-6)


def test_sparse_gradients_accumulate():
  """An embedding table's IndexedSlices gradients add up over micro-batches."""
  table0 = np.arange(12, dtype=np.float32).reshape(6, 2) / 10.0
  ids = iter([np.array([0, 2]), np.array([2, 5])])

  def model_fn():
    table = tf.get_variable('table', initializer=table0)
    rows = tf.nn.embedding_lookup(table, tf.constant(next(ids)))
    tf.losses.add_loss(tf.reduce_mean(tf.reduce_sum(rows, axis=1)))

  with tf.Graph().as_default():
    model = accumulation.deploy(CPU, model_fn, num_micro_batches=2,
                                optimizer=tf.train.GradientDescentOptimizer(1.0))
    [table] = tf.trainable_variables()
    with cpu_session(CPU) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(model.train_op)
      table1 = sess.run(table)
  # Each micro-batch's loss is a mean over its 2 rows: d/d row = 1/2, averaged over 2.
  expected = table0.copy()
  for row, count in ((0, 1), (2, 2), (5, 1)):
    expected[row] -= count * 0.5 / 2
  np.testing.assert_allclose(table1, expected, rtol=1e-6)


BN_DECAY = 0.9


def test_batch_norm_moving_averages_follow_each_micro_batch_in_order():
  """Two micro-batches, one step: the moving mean sees batch 0 then batch 1, like two
  steps of one batch each (not the mean of the two, not one update)."""
  rng = np.random.RandomState(11)
  batches = [rng.randn(4, 3).astype(np.float32) + 2.0, rng.randn(4, 3).astype(np.float32)]
  data = iter(batches)

  def model_fn():
    net = slim.batch_norm(tf.constant(next(data)), decay=BN_DECAY, is_training=True,
                          fused=False, updates_collections=tf.GraphKeys.UPDATE_OPS)
    tf.losses.mean_squared_error(tf.ones_like(net), net)

  with tf.Graph().as_default():
    model = accumulation.deploy(CPU, model_fn, num_micro_batches=2,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    [moving_mean] = [v for v in tf.global_variables() if 'moving_mean' in v.name]
    with cpu_session(CPU) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(model.train_op)
      mean = sess.run(moving_mean)
  expected = np.zeros(3)
  for batch in batches:
    expected = BN_DECAY * expected + (1 - BN_DECAY) * batch.mean(axis=0)
  np.testing.assert_allclose(mean, expected, rtol=1e-5, atol=1e-7)


def test_summaries_are_micro_batch_0s_and_the_loss_is_the_mean():
  values = iter([1.0, 3.0])

  def model_fn():
    w = tf.get_variable('w', initializer=0.0)
    loss = tf.square(w - next(values))
    tf.losses.add_loss(loss)
    tf.summary.scalar('target_loss', loss)

  with tf.Graph().as_default():
    model = accumulation.deploy(CPU, model_fn, num_micro_batches=2,
                                optimizer=tf.train.GradientDescentOptimizer(0.0))
    with cpu_session(CPU) as sess:
      sess.run(tf.global_variables_initializer())
      summary = tf.Summary.FromString(sess.run(model.summary_op))
  tags = {value.tag: value.simple_value for value in summary.value}
  assert tags['target_loss'] == 1.0                      # Micro-batch 0's: (0 - 1)^2.
  assert tags['Losses/total_loss'] == pytest.approx(5.0)  # Mean of 1 and 9.
  assert not any(tag.startswith(accumulation.micro_batch_scope(1)) for tag in tags)


def test_one_micro_batch_is_model_deploy_unchanged():
  def model_fn():
    w = tf.get_variable('w', initializer=1.0)
    tf.losses.add_loss(tf.square(w))

  graphs = []
  for deploy in (lambda: model_deploy.deploy(CPU, model_fn, optimizer=opt()),
                 lambda: accumulation.deploy(CPU, model_fn,
                                             optimizer=opt())):
    with tf.Graph().as_default() as graph:
      opt = lambda: tf.train.GradientDescentOptimizer(0.1)
      deploy()
      graphs.append(sorted(op.name for op in graph.get_operations()))
  assert graphs[0] == graphs[1]


@pytest.mark.parametrize('kwargs, message', [
    ({'num_micro_batches': 0, 'optimizer': True}, 'num_micro_batches=0 must be'),
    ({'num_micro_batches': 2}, 'needs an optimizer'),
])
def test_bad_micro_batch_counts_are_refused(kwargs, message):
  with tf.Graph().as_default():
    if kwargs.get('optimizer'):
      kwargs['optimizer'] = tf.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match=message):
      accumulation.deploy(CPU, lambda: None, **kwargs)
