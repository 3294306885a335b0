"""`variable_update='replicated'`: a copy of the variables per clone, gradients all-reduced.

What model_deploy does with a replicated DeploymentConfig (tf_cnn_benchmarks'
`--variable_update=replicated`, and `collective_all_reduce` across workers without ps):

Copies
    Clone 0 creates the variables under today's names, on its own device; clone i > 0
    creates its copy through `copy_getter(i)`, under `clone_i/<name>` on its device,
    without a regularizer (regularization is clone 0's, added once) and outside the
    trainable and model-variable collections (so `slim.get_model_variables()`,
    `tf.trainable_variables()`, moving averages and fine-tune restores see one copy).
    Once the train op exists, `keep_one_copy` moves the copies and their optimizer slots
    from the global to the local variables: the checkpoint saves one copy under today's
    names, `init_op` and a restore touch clone 0's alone.

The same values everywhere
    `sync_op` (in the REPLICA_SYNC collection, which training.session_loop runs in its
    local init op, i.e. after the initialization or the restore and the fine-tune init):
    across workers without ps, every global variable of worker 0 (model, slots, global
    step, loss scale: what its checkpoint holds) is broadcast to the others; then every
    clone's copy is assigned its clone 0's value.

Gradients
    Each clone computes the gradient of its loss (scaled 1/num_clones, as model_deploy
    does) for its own copy; `all_reduce` packs each clone's gradients into
    `gradient_repacking` flat tensors per dtype, sums each pack over every clone of every
    worker (CollectiveReduce, merge Add; NCCL between GPUs, a ring over gRPC between
    workers), divides by the number of workers, and unpacks. Every clone then applies
    the same mean gradient to its own copy, in one `apply_gradients` (one global-step
    increment, one loss-scale update). The copies stay equal: same start, same update.

Every worker builds the same collectives (group keys, instance keys in build order,
group sizes) and must run the same steps: the trainer guarantees both.
"""

import math

from tensorflow.python.ops import collective_ops

from tf_compat import tf

__all__ = ['REPLICA_SYNC', 'StopVote', 'copy_getter', 'copy_name', 'is_copy', 'original_name',
           'copies_of',
           'all_reduce', 'keep_one_copy', 'sync_op', 'split_by_clone']

REPLICA_SYNC = 'slimdeploy_replica_sync'
_COPIES = 'slimdeploy_replica_copies'  # The variables copy_getter made, in build order.
GRADIENTS_GROUP_KEY = 1   # Every clone of every worker.
BROADCAST_GROUP_KEY = 2   # One CPU per worker.
_FIRST_INSTANCE_KEY = 100


def copy_name(name, clone_index):
  """'LeNet/fc3/weights' -> 'clone_1/LeNet/fc3/weights' (clone 0 keeps the name)."""
  return 'clone_%d/%s' % (clone_index, name) if clone_index else name


def copy_getter(clone_index):
  """A variable scope's custom getter making clone `clone_index`'s copies (module doc)."""

  def getter(getter, name, *args, **kwargs):  # pylint: disable=redefined-outer-name
    kwargs.update(regularizer=None, collections=[tf.GraphKeys.GLOBAL_VARIABLES],
                  trainable=False)
    variable = getter(copy_name(name, clone_index), *args, **kwargs)
    if all(copy is not variable for copy in tf.get_collection(_COPIES)):
      tf.add_to_collection(_COPIES, variable)
    return variable
  return getter


def is_copy(variable):
  """Whether `variable` is a clone's copy (or a copy's slot), not clone 0's original."""
  return _original_name(variable.op.name) is not None


def _original_name(op_name):
  """'clone_2/LeNet/w/Momentum' -> 'LeNet/w/Momentum' when it is a copy's, else None."""
  head, _, rest = op_name.partition('/')
  if not head.startswith('clone_') or not rest:
    return None
  copies = _copy_names(tf.get_default_graph())
  parts = op_name.split('/')
  # The copy itself, or a slot below it ('<copy>/Momentum'): one of the name's prefixes.
  if any('/'.join(parts[:end]) in copies for end in range(2, len(parts) + 1)):
    return rest
  return None


def _copy_names(graph):
  """The copies' op names, kept on the graph until the collection grows."""
  copies = graph.get_collection(_COPIES)
  cached = getattr(graph, '_slimdeploy_copy_names', (None, None))
  if cached[0] != len(copies):
    cached = (len(copies), frozenset(copy.op.name for copy in copies))
    graph._slimdeploy_copy_names = cached  # pylint: disable=protected-access
  return cached[1]


def original_name(op_name):
  """The name of clone 0's original of a copy (or a copy's slot); other names as given."""
  return _original_name(op_name) or op_name


def copies_of(variables, clone_index):
  """Clone `clone_index`'s copies of clone 0's `variables`, in the same order."""
  if clone_index == 0:
    return list(variables)
  by_name = {copy.op.name: copy for copy in tf.get_collection(_COPIES)}
  try:
    return [by_name[copy_name(var.op.name, clone_index)] for var in variables]
  except KeyError as missing:
    raise ValueError('clone %d has no copy of %s: with variable_update=replicated every '
                     'variable must be made by tf.get_variable (slim does) inside the '
                     'clones' % (clone_index, missing)) from None


def split_by_clone(grads_and_vars, num_clones):
  """The concatenated per-clone lists `optimize_clones` returns when replicated."""
  size = len(grads_and_vars) // num_clones
  return [grads_and_vars[i * size:(i + 1) * size] for i in range(num_clones)]


class _InstanceKeys:
  """Instance keys in build order, the same on every worker building the same graph."""

  def __init__(self, graph):
    self._graph = graph

  def next(self):
    key = getattr(self._graph, '_slimdeploy_instance_key', _FIRST_INSTANCE_KEY)
    self._graph._slimdeploy_instance_key = key + 1  # pylint: disable=protected-access
    return key


def _dense(gradient):
  return tf.convert_to_tensor(gradient)


def _packs(sizes, count):
  """Split points of a flat vector of sum(sizes) into `count` near-equal packs."""
  total = sum(sizes)
  count = max(1, min(count, total))
  base, extra = divmod(total, count)
  return [base + (1 if i < extra else 0) for i in range(count)]


def _reduce_clone(config, gradients, device, keys):
  """All-reduces one clone's `gradients` (one dtype) packed; -> the summed gradients."""
  with tf.device(device):
    flat = tf.concat([tf.reshape(g, [-1]) for g in gradients], 0)
    sizes = [int(math.prod(g.shape.as_list())) for g in gradients]
    packs = tf.split(flat, _packs(sizes, config.gradient_repacking))
    summed = [collective_ops.all_reduce(
        pack, config.all_reduce_group_size(), GRADIENTS_GROUP_KEY, keys[index],
        merge_op='Add', final_op='Id', communication_hint=config.all_reduce_hint())
              for index, pack in enumerate(packs)]
    total = tf.concat(summed, 0) if len(summed) > 1 else summed[0]
    if config.num_replicas > 1:
      total = total / float(config.num_replicas)
    return [tf.reshape(piece, g.shape) for piece, g in
            zip(tf.split(total, sizes), gradients)]


def all_reduce(config, grads_and_vars):
  """The mean gradient over every clone of every worker, for each clone's own copy.

  Args:
    config: the replicated DeploymentConfig.
    grads_and_vars: the clones' lists concatenated (clone 0's first), as
      `optimize_clones` returns them when replicated; the same variables (by position)
      have a gradient in every clone.

  Returns:
    The same list with every gradient replaced by the all-reduced mean.
  """
  per_clone = split_by_clone(grads_and_vars, config.num_clones)
  dtypes = sorted({g.dtype.base_dtype.name for g, _ in per_clone[0] if g is not None})
  keys = _InstanceKeys(tf.get_default_graph())
  reduced = [list(clone) for clone in per_clone]
  for dtype in dtypes:
    positions = [i for i, (g, _) in enumerate(per_clone[0])
                 if g is not None and g.dtype.base_dtype.name == dtype]
    sizes = [int(math.prod(per_clone[0][i][1].shape.as_list())) for i in positions]
    pack_keys = [keys.next() for _ in _packs(sizes, config.gradient_repacking)]
    for clone_index, clone in enumerate(per_clone):
      gradients = [_dense(clone[i][0]) for i in positions]
      with tf.name_scope('all_reduce/clone_%d' % clone_index):
        summed = _reduce_clone(config, gradients, config.clone_device(clone_index),
                               pack_keys)
      for i, gradient in zip(positions, summed):
        reduced[clone_index][i] = (gradient, clone[i][1])
  return [pair for clone in reduced for pair in clone]


def keep_one_copy(graph=None):
  """Moves every copy and every copy's slot from the global to the local variables
  (module doc). Returns the moved variables."""
  graph = graph or tf.get_default_graph()
  with graph.as_default():
    moved = [var for var in tf.global_variables() if is_copy(var)]
    ids = {id(var) for var in moved}
    for key in (tf.GraphKeys.GLOBAL_VARIABLES, tf.GraphKeys.TRAINABLE_VARIABLES,
                tf.GraphKeys.MODEL_VARIABLES, tf.GraphKeys.MOVING_AVERAGE_VARIABLES):
      collection = graph.get_collection_ref(key)
      collection[:] = [var for var in collection if id(var) not in ids]
    for var in moved:
      graph.add_to_collection(tf.GraphKeys.LOCAL_VARIABLES, var)
  return moved


def _broadcast(config, variables, keys):
  """Worker 0's values of `variables` to every worker (one flat tensor per dtype);
  -> the assign ops (none on worker 0)."""
  assigns = []
  by_dtype = {}
  for var in variables:
    by_dtype.setdefault(var.dtype.base_dtype, []).append(var)
  for dtype, group in sorted(by_dtype.items(), key=lambda item: item[0].name):
    sizes = [int(math.prod(var.shape.as_list())) for var in group]
    key = keys.next()
    shape = [sum(sizes)]
    with tf.device(config.optimizer_device()), tf.name_scope('broadcast_from_worker_0'):
      if config.replica_id == 0:
        flat = tf.concat([tf.reshape(var.read_value(), [-1]) for var in group], 0)
        assigns.append(collective_ops.broadcast_send(
            flat, shape, dtype, config.num_replicas, BROADCAST_GROUP_KEY, key))
        continue
      flat = collective_ops.broadcast_recv(shape, dtype, config.num_replicas,
                                           BROADCAST_GROUP_KEY, key)
      assigns += [var.assign(tf.reshape(piece, var.shape)) for piece, var in
                  zip(tf.split(flat, sizes), group)]
  return assigns


def sync_op(config, graph=None):
  """Worker 0's global variables to every worker, then clone 0's to every copy (module
  doc); added to REPLICA_SYNC. Build it after `keep_one_copy`."""
  graph = graph or tf.get_default_graph()
  with graph.as_default(), tf.name_scope('replica_sync'):
    broadcast = []
    if config.num_replicas > 1:
      shared = [var for var in tf.global_variables()
                if var.dtype.base_dtype in (tf.float32, tf.float64, tf.float16,
                                            tf.int32, tf.int64)]
      broadcast = _broadcast(config, shared, _InstanceKeys(graph))
    by_name = {var.op.name: var for var in tf.global_variables()}
    copies = [var for var in tf.local_variables() if is_copy(var)]
    with tf.control_dependencies(broadcast + [copy.initializer for copy in copies]):
      assigns = [copy.assign(by_name[_original_name(copy.op.name)].read_value())
                 for copy in copies]
    op = tf.group(*(assigns + broadcast), name='replica_sync')
  graph.add_to_collection(REPLICA_SYNC, op)
  return op


class StopVote:
  """Workers without ps stop after the same step: each step ends with a vote (a max over
  the workers' CPUs of a flag set when this worker was asked to stop), so a stop asked of
  any worker (SIGTERM, a time limit) stops them all after the same step, and the chief
  saves it. Without the vote a worker that stopped first would leave the others blocked
  in the next step's all-reduce.

  Build it in the training graph after `deploy` (every worker in the same order: its
  instance key follows the gradients'); `request(sess)` when asked to stop; `agreed(sess)`
  after each step, on every worker.
  """

  def __init__(self, config):
    graph = tf.get_default_graph()
    with tf.device(config.optimizer_device()), tf.name_scope('stop_vote'):
      flag = tf.Variable(0.0, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                         name='requested')
      self._request = flag.assign(1.0)
      self._agreed = collective_ops.all_reduce(
          flag.read_value(), config.num_replicas, BROADCAST_GROUP_KEY,
          _InstanceKeys(graph).next(), merge_op='Max', final_op='Id')

  def request(self, sess):
    sess.run(self._request)

  def agreed(self, sess):
    """Whether any worker asked to stop by its vote of this step (the same on all)."""
    return bool(sess.run(self._agreed))
