"""deployment/replicated.py through model_deploy.deploy: a copy of the variables per clone,
gradients all-reduced.

The numbers are checked against NumPy (an independent reference: a hand-written forward
and backward pass of the same MLP) and against one clone of the global batch, on logical
CPU devices; GPU and multi-worker graphs are built, never run (no GPU, no cluster here),
and read for their devices, the collectives' settings and the keys every worker must share.
"""

import numpy as np
import pytest

from deployment import accumulation, model_deploy, replicated
from deployment.session import session_config
from tf_compat import tf, slim

DeploymentConfig = model_deploy.DeploymentConfig
BATCH = 8
LEARNING_RATE = 0.1
MOMENTUM = 0.9
DECAY = 0.01
STEPS = 5
RNG = np.random.RandomState(3)
DATA = RNG.randn(BATCH, 6).astype(np.float32)
TARGETS = RNG.randn(BATCH, 2).astype(np.float32)


def _model_fn(iterator):
  def model_fn():
    inputs, targets = iterator.get_next()
    hidden = slim.fully_connected(inputs, 5, activation_fn=tf.tanh, scope='fc1',
                                  weights_regularizer=slim.l2_regularizer(DECAY))
    outputs = slim.fully_connected(hidden, 2, activation_fn=None, scope='fc2')
    tf.losses.mean_squared_error(targets, outputs)
  return model_fn


def _optimizer(kind):
  if kind == 'sgd':
    return tf.train.GradientDescentOptimizer(LEARNING_RATE)
  return tf.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)


def _train(num_clones, variable_update, optimizer, micro_batches=1, repacking=2):
  """Trains STEPS steps on the fixed batch of BATCH examples (each step draws it once,
  split over clones and micro-batches); -> (start values, end values of every variable,
  global and local, by name)."""
  with tf.Graph().as_default():
    config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True,
                              variable_update=variable_update,
                              gradient_repacking=repacking)
    per_draw = BATCH // (num_clones * micro_batches)
    dataset = tf.data.Dataset.from_tensor_slices((DATA, TARGETS)).batch(per_draw).repeat()
    iterator = tf.data.make_one_shot_iterator(dataset)
    deployed = accumulation.deploy(config, _model_fn(iterator), num_micro_batches=micro_batches,
                                   optimizer=_optimizer(optimizer))
    variables = tf.global_variables() + tf.local_variables()
    with tf.Session(config=session_config.make_session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run([tf.local_variables_initializer()] + tf.get_collection(replicated.REPLICA_SYNC))
      start = {v.op.name: sess.run(v) for v in variables}
      for _ in range(STEPS):
        sess.run(deployed.train_op)
      return start, {v.op.name: sess.run(v) for v in variables}


def _numpy_reference(start, optimizer):
  """The same MLP, loss and update in NumPy, from `start`, on the whole batch."""
  w1, b1 = start['fc1/weights'].astype(np.float64), start['fc1/biases'].astype(np.float64)
  w2, b2 = start['fc2/weights'].astype(np.float64), start['fc2/biases'].astype(np.float64)
  params = [w1, b1, w2, b2]
  accumulators = [np.zeros_like(p) for p in params]
  x, y = DATA.astype(np.float64), TARGETS.astype(np.float64)
  for _ in range(STEPS):
    hidden = np.tanh(x @ params[0] + params[1])
    outputs = hidden @ params[2] + params[3]
    d_out = 2.0 * (outputs - y) / outputs.size
    d_pre = (d_out @ params[2].T) * (1.0 - hidden ** 2)
    grads = [x.T @ d_pre + DECAY * params[0], d_pre.sum(0), hidden.T @ d_out, d_out.sum(0)]
    for i, grad in enumerate(grads):
      if optimizer == 'sgd':
        params[i] = params[i] - LEARNING_RATE * grad
      else:
        accumulators[i] = MOMENTUM * accumulators[i] + grad
        params[i] = params[i] - LEARNING_RATE * accumulators[i]
  return dict(zip(['fc1/weights', 'fc1/biases', 'fc2/weights', 'fc2/biases'], params))


@pytest.mark.parametrize('micro_batches', [1, 2])
@pytest.mark.parametrize('optimizer', ['sgd', 'momentum'])
def test_two_replicated_clones_train_like_one_clone_of_the_global_batch_and_numpy(
    optimizer, micro_batches):
  start, replicas = _train(2, 'replicated', optimizer, micro_batches)
  single_start, single = _train(1, 'parameter_server', optimizer)
  reference = _numpy_reference(start, optimizer)
  single_reference = _numpy_reference(single_start, optimizer)
  for name, expected in reference.items():
    assert np.abs(expected - start[name]).max() > 1e-3, name  # Trained: not trivially equal.
    np.testing.assert_allclose(replicas[name], expected, rtol=0, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(single[name], single_reference[name], rtol=0, atol=1e-6,
                               err_msg=name)
    # The copy is clone 0's bit for bit.
    np.testing.assert_array_equal(replicas['clone_1/' + name], replicas[name], err_msg=name)
  slots = [name for name in replicas if name.endswith('/Momentum')]
  assert len(slots) == (8 if optimizer == 'momentum' else 0)
  for name in slots:
    if not name.startswith('clone_'):
      np.testing.assert_array_equal(replicas['clone_1/' + name], replicas[name])
  assert replicas['global_step'] == STEPS


def test_the_copies_start_from_clone_0_and_only_one_copy_is_global():
  start, _ = _train(2, 'replicated', 'momentum')
  for name in ('fc1/weights', 'fc1/biases', 'fc2/weights', 'fc2/biases'):
    np.testing.assert_array_equal(start['clone_1/' + name], start[name])
  with tf.Graph().as_default():
    config = DeploymentConfig(num_clones=2, clone_on_cpu=True, variable_update='replicated')
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((DATA, TARGETS)).batch(4).repeat())
    model_deploy.deploy(config, _model_fn(iterator), optimizer=_optimizer('momentum'))
    saved = sorted(v.op.name for v in tf.global_variables())  # What a Saver saves.
    assert saved == ['fc1/biases', 'fc1/biases/Momentum', 'fc1/weights',
                     'fc1/weights/Momentum', 'fc2/biases', 'fc2/biases/Momentum',
                     'fc2/weights', 'fc2/weights/Momentum', 'global_step']
    assert sorted(v.op.name for v in slim.get_model_variables()) == [
        'fc1/biases', 'fc1/weights', 'fc2/biases', 'fc2/weights']
    assert sorted(v.op.name for v in tf.trainable_variables()) == [
        'fc1/biases', 'fc1/weights', 'fc2/biases', 'fc2/weights']
    # One regularization loss: clone 0's.
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1
    copies = {v.op.name: v for v in tf.local_variables()}
    assert copies['clone_1/fc1/weights'].device.endswith('/device:CPU:1')
    assert copies['clone_1/fc1/weights/Momentum'].device.endswith('/device:CPU:1')


def _collectives(graph, op_type):
  return [op for op in graph.get_operations() if op.type == op_type]


def _build(config, optimizer='momentum'):
  graph = tf.Graph()
  with graph.as_default():
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((DATA, TARGETS)).batch(2).repeat())
    model_deploy.deploy(config, _model_fn(iterator), optimizer=_optimizer(optimizer))
  return graph


@pytest.mark.parametrize('repacking', [1, 2, 3])
def test_gradients_go_in_gradient_repacking_packs_per_clone(repacking):
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True, variable_update='replicated',
                            gradient_repacking=repacking)
  reduces = _collectives(_build(config), 'CollectiveReduce')
  assert len(reduces) == 2 * repacking
  assert {op.get_attr('group_size') for op in reduces} == {2}
  assert sorted({op.get_attr('instance_key') for op in reduces}) == list(
      range(100, 100 + repacking))


def test_on_gpus_every_collective_asks_for_nccl_and_runs_on_its_clones_gpu():
  config = DeploymentConfig(num_clones=4, variable_update='replicated')
  graph = _build(config)
  reduces = _collectives(graph, 'CollectiveReduce')
  assert reduces
  for op in reduces:
    assert op.get_attr('communication_hint') == b'nccl', op.name
    assert '/device:GPU:' in op.device, op.device
  assert sorted({tf.DeviceSpec.from_string(op.device).device_index for op in reduces}) == [
      0, 1, 2, 3]
  with graph.as_default():
    for var in tf.global_variables() + tf.local_variables():
      if var.op.name == 'global_step':
        assert var.device.endswith('/device:CPU:0')
        continue
      clone = int(var.op.name.split('/')[0][len('clone_'):]) if var.op.name.startswith(
          'clone_') else 0
      assert var.device.endswith('/device:GPU:%d' % clone), (var.op.name, var.device)
  assert session_config.make_session_config(config).experimental.collective_nccl
  assert not session_config.make_session_config(
      DeploymentConfig(num_clones=2)).experimental.collective_nccl
  on_cpu = DeploymentConfig(num_clones=2, clone_on_cpu=True, variable_update='replicated')
  assert {op.get_attr('communication_hint') for op in _collectives(
      _build(on_cpu), 'CollectiveReduce')} == {b'ring'}


def _worker_graph(task):
  return _build(DeploymentConfig(num_clones=2, replica_id=task, num_replicas=2,
                                 variable_update='replicated'))


def test_workers_without_ps_build_one_group_and_the_same_keys():
  graphs = [_worker_graph(0), _worker_graph(1)]
  keys = []
  for task, graph in enumerate(graphs):
    reduces = _collectives(graph, 'CollectiveReduce')
    assert {op.get_attr('group_size') for op in reduces} == {4}
    assert {op.get_attr('communication_hint') for op in reduces} == {b'nccl'}
    assert {op.device for op in reduces} == {
        '/job:worker/task:%d/device:GPU:%d' % (task, i) for i in range(2)}
    keys.append(sorted((op.get_attr('group_key'), op.get_attr('instance_key'))
                       for op in reduces))
  assert keys[0] == keys[1]
  # Worker 0 sends its checkpoint's variables (one flat tensor per dtype), the other
  # receives them with the same keys.
  sends = _collectives(graphs[0], 'CollectiveBcastSend')
  receives = _collectives(graphs[1], 'CollectiveBcastRecv')
  assert not _collectives(graphs[0], 'CollectiveBcastRecv')
  assert not _collectives(graphs[1], 'CollectiveBcastSend')
  assert len(sends) == len(receives) == 2  # float32 and int64 (the global step)
  assert sorted(op.get_attr('instance_key') for op in sends) == sorted(
      op.get_attr('instance_key') for op in receives)
  assert {op.device for op in receives} == {'/job:worker/task:1/device:CPU:0'}


@pytest.mark.parametrize('kwargs, message', [
    (dict(num_ps_tasks=1, variable_update='replicated'), 'num_ps_tasks=1 must be 0'),
    (dict(num_replicas=2), "needs variable_update='replicated'"),
    (dict(variable_update='mirrored'), "variable_update='mirrored' is not known"),
    (dict(gradient_repacking=0), 'gradient_repacking=0 must be an integer >= 1'),
])
def test_settings_that_cannot_work_are_refused_in_one_line(kwargs, message):
  with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)')) as error:
    DeploymentConfig(**kwargs)
  assert '\n' not in str(error.value)


def test_slim_learning_train_runs_the_replicated_train_op_with_the_sync_in_its_local_init(
    tmp_path):
  """slim's own loop: `deploy`'s train_op as ever; the copies' sync goes in the
  local_init_op it is given (REPLICA_SYNC), and the copies end equal to clone 0."""
  with tf.Graph().as_default():
    config = DeploymentConfig(num_clones=2, clone_on_cpu=True, variable_update='replicated')
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((DATA, TARGETS)).batch(4).repeat())
    deployed = model_deploy.deploy(config, _model_fn(iterator),
                                   optimizer=_optimizer('momentum'))
    local_init = tf.group(tf.local_variables_initializer(), tf.tables_initializer(),
                          *tf.get_collection(replicated.REPLICA_SYNC))
    seen = {}

    def train_step(sess, train_op, global_step, kwargs):
      loss, done = slim.learning.train_step(sess, train_op, global_step, kwargs)
      seen.update({v.op.name: sess.run(v) for v in tf.global_variables() +
                   tf.local_variables()})
      return loss, done
    slim.learning.train(deployed.train_op, str(tmp_path), number_of_steps=3,
                        local_init_op=local_init, train_step_fn=train_step,
                        session_config=session_config.make_session_config(config),
                        save_summaries_secs=0, save_interval_secs=0)
  assert seen['global_step'] == 3
  for name in ('fc1/weights', 'fc2/biases', 'fc1/weights/Momentum'):
    np.testing.assert_array_equal(seen['clone_1/' + name], seen[name])
  saved = dict(tf.train.list_variables(str(tmp_path)))
  assert 'fc1/weights' in saved and not [n for n in saved if n.startswith('clone_')]
