"""Gradient accumulation: K micro-batches per update, all inside ONE `session.run`.

`deploy(config, model_fn, num_micro_batches=K, optimizer=...)` is `model_deploy.deploy`
in which every clone draws and runs K batches one after another within the same step;
the update applies the mean gradient of the K x num_clones batches (x the workers a
`SyncReplicasOptimizer` aggregates), once, and global_step advances by one. Other tools
call K: Horovod `backward_passes_per_step`, mmaction2 (mmengine's OptimWrapper)
`accumulative_counts`, PyTorch Lightning `accumulate_grad_batches`, fairseq `--update-freq`.

How the step is built
    * Micro-batch 0 is model_deploy's usual graph: same op names, same clone scopes
      (`clone_i`, or none with one clone), so placement checks and summaries read it as
      before. Micro-batch k > 0 is built again by `create_clones` with the variables
      reused, under the name scope `micro_batch_k` (`micro_batch_k/clone_i`).
    * Micro-batch k is built under a control dependency on the running gradient sum that
      includes micro-batch k-1 and on k-1's batch-norm updates: its batch draw, and every
      op of it that takes no input from micro-batch k itself, waits for them, and the
      rest follows by data dependency. The micro-batches therefore run one after another:
      a device holds the activations of ONE micro-batch at a time, plus the running sum
      of the gradients (the memory this is for). model_fn must draw its batch in the
      graph (an iterator's get_next, as the trainer does): TensorFlow drops the control
      inputs of a fed placeholder, so fed batches give the same update without that order.
    * Gradients of one micro-batch are `model_deploy.optimize_clones`' (each clone's loss
      scaled by 1/num_clones, the clones' gradients summed, regularization once); the
      update gets their mean over the K micro-batches, so regularization still counts
      once. The returned loss is the mean of the micro-batches' total losses.

Why inside one run and not over K runs
    Nothing of an accumulation outlives its step: there is no accumulator variable to
    checkpoint, restore or reset, so a checkpoint, a SIGTERM, a restart or a synchronous
    chief only ever sees whole updates, and a sync worker still sends one gradient per
    step. The costs: a graph K times the model's (built once, at start-up); each
    micro-batch's gradient is added on the optimizer's device (the worker CPU, where
    model_deploy sums the clones' and the update runs). The summary op, which shows the
    mean loss, is fetched inside a training step when due, so it reads that step's K
    forward passes instead of running them again.

Batch norm
    Each micro-batch is normalised with its OWN batch statistics (accumulation does not
    make batch norm see K x b examples). The moving mean/variance are updated once per
    micro-batch, K times per update, from the first clone's micro-batches in order (k
    reads what k-1 wrote), exactly like K steps of batch b: with `--batch_norm_decay` d
    they forget at d**K per update. Freezing batch norm (`nets.batch_norm`) avoids both.

Summaries
    Those of micro-batch 0 (as TF-Slim keeps clone 0's): the clone and regularization
    losses, the batch's accuracy and the input images are micro-batch 0's;
    `Losses/total_loss` is the mean over all K micro-batches.
"""

from deployment import model_deploy
from tf_compat import tf

__all__ = ['MicroBatches', 'deploy', 'micro_batch_scope']


def micro_batch_scope(index):
  """Name scope of micro-batch `index` > 0 (micro-batch 0 keeps model_deploy's scopes)."""
  return 'micro_batch_%d' % index


class _MicroBatchScopes:
  """A DeploymentConfig as micro-batch k > 0 sees it: the same devices and variables,
  the clone scopes under `micro_batch_k`."""

  def __init__(self, config, index):
    self._config = config
    self._prefix = micro_batch_scope(index)

  def __getattr__(self, name):
    return getattr(self._config, name)

  def clone_scope(self, clone_index):
    scope = self._config.clone_scope(clone_index)
    return '%s/%s' % (self._prefix, scope) if scope else self._prefix


def _tensors_of(gradient):
  if isinstance(gradient, tf.IndexedSlices):
    return [gradient.values, gradient.indices]
  return [gradient]


def _add(total, gradient):
  """Sparse + sparse stays sparse (slices concatenated, as model_deploy sums clones)."""
  if isinstance(total, tf.IndexedSlices) and isinstance(gradient, tf.IndexedSlices):
    return tf.IndexedSlices(tf.concat([total.values, gradient.values], 0),
                            tf.concat([total.indices, gradient.indices], 0),
                            total.dense_shape)
  return tf.add(tf.convert_to_tensor(total), tf.convert_to_tensor(gradient))


def _scale(gradient, factor):
  if isinstance(gradient, tf.IndexedSlices):
    return tf.IndexedSlices(gradient.values * factor, gradient.indices,
                            gradient.dense_shape)
  return gradient * factor


class _RunningSum:
  """Each variable's gradient summed over the micro-batches built so far."""

  def __init__(self, grads_and_vars):
    self._variables = [var for _, var in grads_and_vars]
    self._sums = {id(var): grad for grad, var in grads_and_vars}

  def add(self, grads_and_vars):
    for grad, var in grads_and_vars:
      if id(var) not in self._sums:
        raise ValueError('micro-batches disagree on the variables with a gradient: %s has '
                         'one only after the first micro-batch' % var.op.name)
      self._sums[id(var)] = _add(self._sums[id(var)], grad)

  def tensors(self):
    """What the next micro-batch waits for."""
    return [t for var in self._variables for t in _tensors_of(self._sums[id(var)])]

  def mean(self, count):
    return [(_scale(self._sums[id(var)], 1.0 / count), var) for var in self._variables]


def _drop_summaries_since(before):
  """Summaries of micro-batches k > 0 are left out, as those of clones i > 0 are."""
  collection = tf.get_collection_ref(tf.GraphKeys.SUMMARIES)
  collection[:] = [summary for summary in collection if summary in before]


class MicroBatches:
  """`optimize_fn` for `model_deploy.deploy`: the clones' gradients over K micro-batches.

  Called like `model_deploy.optimize_clones` with micro-batch 0's clones; builds
  micro-batches 1..K-1 (module doc) and returns (mean total loss, mean grads_and_vars).

  Args:
    config: the `DeploymentConfig` the clones were created with.
    model_fn, args, kwargs: as given to `deploy`; model_fn is called once per clone and
      micro-batch, and must draw a new batch each time (e.g. `iterator.get_next()`).
    num_micro_batches: K >= 1.
  """

  def __init__(self, config, model_fn, num_micro_batches, args=None, kwargs=None):
    if (isinstance(num_micro_batches, bool) or not isinstance(num_micro_batches, int)
        or num_micro_batches < 1):
      raise ValueError('num_micro_batches=%r must be an integer >= 1' % (num_micro_batches,))
    self._config = config
    self._model_fn = model_fn
    self._args = args
    self._kwargs = kwargs
    self.num_micro_batches = num_micro_batches

  def __call__(self, clones, optimizer, regularization_losses=None, **kwargs):
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, optimizer, regularization_losses, **kwargs)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
    losses = [total_loss]
    running = _RunningSum(grads_and_vars)
    for index in range(1, self.num_micro_batches):
      loss, grads_and_vars, updates = self._micro_batch(
          index, running.tensors() + updates, optimizer, regularization_losses, kwargs)
      losses.append(loss)
      running.add(grads_and_vars)
    # The last micro-batch's batch-norm updates run with the update (the others are
    # waited for by the next micro-batch).
    with tf.control_dependencies(updates):
      mean = running.mean(self.num_micro_batches)
    if len(losses) > 1:
      total_loss = tf.math.divide(tf.add_n(losses), float(len(losses)),
                                  name='micro_batches_mean_loss')
    return total_loss, mean

  def _micro_batch(self, index, wait_for, optimizer, regularization_losses, kwargs):
    """Builds micro-batch `index` after `wait_for`; -> (total loss, grads, updates)."""
    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
    scopes = _MicroBatchScopes(self._config, index)
    with tf.control_dependencies(wait_for):
      with tf.variable_scope(tf.get_variable_scope(), reuse=True):
        clones = model_deploy.create_clones(scopes, self._model_fn, self._args,
                                            self._kwargs)
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, optimizer, regularization_losses, **kwargs)
    _drop_summaries_since(summaries)
    return (total_loss, grads_and_vars,
            tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope))


def deploy(config, model_fn, num_micro_batches=1, args=None, kwargs=None, **deploy_kwargs):
  """`model_deploy.deploy` with `num_micro_batches` micro-batches per update.

  With an optimizer and K > 1 the train op runs K micro-batches per clone (module doc);
  otherwise it is exactly `model_deploy.deploy(config, model_fn, args, kwargs, ...)`.
  """
  if num_micro_batches != 1 and deploy_kwargs.get('optimizer') is not None:
    deploy_kwargs['optimize_fn'] = MicroBatches(config, model_fn, num_micro_batches,
                                                args, kwargs)
  elif num_micro_batches != 1:
    raise ValueError('num_micro_batches=%r needs an optimizer: micro-batches exist to '
                     'accumulate gradients' % (num_micro_batches,))
  return model_deploy.deploy(config, model_fn, args, kwargs, **deploy_kwargs)
