"""Deploy one model on several clones (devices of one machine) and replicas (machines).

The public names are TF-Slim's (`DeploymentConfig`, `create_clones`, `optimize_clones`,
`deploy`, `Clone`, `DeployedModel`) so existing training scripts read the same. This
module answers device questions only: it knows nothing about data or models.

Topology
    num_clones      model copies in one process, one per GPU (or per logical CPU device
                    with `clone_on_cpu`); they share one set of variables.
    num_replicas    worker processes (usually one per machine); each runs num_clones clones.
    num_ps_tasks    parameter-server tasks holding the variables, balanced by bytes.

Semantics: what a training step computes (global batch, each clone's loss scaled by
1/num_clones and the gradients summed, regularization once on the first clone, batch norm's
UPDATE_OPS from the first clone, the summaries, micro-batches, the all-reduce) is written
once, in docs/deployment.md, "What one step computes".

Placement: `deployment_config` (where clones, variables, inputs and the optimizer go).

With `variable_update='replicated'` each clone has its own copy of the variables and the
clones' gradients are all-reduced instead of summed on one device (`deployment.replicated`
says how); the semantics are the same, and `deploy` returns the same DeployedModel. The
copies must start equal to clone 0 after the initialization or a restore: run the op in the
`replicated.REPLICA_SYNC` collection in the local init op (training.session_loop does; with
slim.learning.train pass `local_init_op=tf.group(tf.local_variables_initializer(),
tf.tables_initializer(), *tf.get_collection(replicated.REPLICA_SYNC))`).
"""

import collections

from deployment import replicated
from deployment.deployment_config import (DeploymentConfig, SUMMARY_OP_TYPES,
                                         VARIABLE_OP_TYPES, VARIABLE_UPDATES,
                                         clone_device_fn)
from tf_compat import tf, slim

__all__ = ['Clone', 'DeployedModel', 'DeploymentConfig', 'create_clones',
           'optimize_clones', 'deploy', 'VARIABLE_OP_TYPES', 'SUMMARY_OP_TYPES',
           'VARIABLE_UPDATES']

Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device'])
Clone.__doc__ = """One model copy: `outputs` of model_fn, its name `scope`, its `device`."""

DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])
DeployedModel.__doc__ = """What `deploy` built: train_op (None without optimizer),
summary_op (None without summaries), total_loss, and the list of Clones."""


def create_clones(config, model_fn, args=None, kwargs=None):
  """Builds `config.num_clones` copies of the model, sharing variables.

  For clone i: name scope `clone_scope(i)`, device `clone_device(i)`, the current variable
  scope re-entered with reuse for i > 0. `model_fn(*args, **kwargs)` must add its losses to
  the LOSSES collection (tf.losses.* and slim.losses.* do); its return value is kept as
  the clone's `outputs`. It is called once per clone, in order 0..num_clones-1.

  Returns:
    A list of `Clone(outputs, scope, device)`, one per clone.
  """
  clones = []
  args = args or []
  kwargs = kwargs or {}
  for i in range(config.num_clones):
    regularization = list(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
    with tf.name_scope(config.clone_scope(i)) as clone_scope:
      with tf.device(clone_device_fn(config, i)):
        with _clone_variable_scope(config, i):
          outputs = model_fn(*args, **kwargs)
      clones.append(Clone(outputs, clone_scope, config.clone_device(i)))
    if getattr(config, 'replicated', False) and i > 0:
      # A copy's regularizer (a layer adds its own): clone 0's counts, once.
      tf.get_collection_ref(tf.GraphKeys.REGULARIZATION_LOSSES)[:] = regularization
  return clones


def _clone_variable_scope(config, index):
  """Clone `index` reuses clone 0's variables, or when replicated makes its copies."""
  if getattr(config, 'replicated', False) and index > 0:
    return tf.variable_scope(tf.get_variable_scope(),
                             custom_getter=replicated.copy_getter(index))
  return tf.variable_scope(tf.get_variable_scope(), reuse=True if index > 0 else None)


def _cpu_of(device):
  """The CPU of the same job and task as `device` ('/job:w/task:1/device:GPU:0' -> ...CPU:0)."""
  return device.rsplit('/device:', 1)[0] + '/device:CPU:0'


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """The clone's data loss / num_clones, plus `regularization_losses` when given.

  Returns None when the clone has no losses at all.
  """
  sum_loss = None
  clone_loss = None
  regularization_loss = None
  with tf.device(clone.device):
    all_losses = []
    clone_losses = tf.get_collection(tf.GraphKeys.LOSSES, clone.scope)
    if clone_losses:
      clone_loss = tf.add_n(clone_losses, name='clone_loss')
      if num_clones > 1:
        clone_loss = tf.math.divide(clone_loss, float(num_clones),
                                    name='scaled_clone_loss')
      all_losses.append(clone_loss)
    if regularization_losses:
      regularization_loss = tf.add_n(regularization_losses, name='regularization_loss')
      all_losses.append(regularization_loss)
    if all_losses:
      sum_loss = tf.add_n(all_losses)
  with tf.device(_cpu_of(clone.device)):
    if clone_loss is not None:
      # Created inside the clone's name scope: the tag reads clone_i/Losses/clone_loss.
      tf.summary.scalar('Losses/clone_loss', clone_loss)
    if regularization_loss is not None:
      tf.summary.scalar('Losses/regularization_loss', regularization_loss)
  return sum_loss


def _optimize_clone(optimizer, clone, num_clones, regularization_losses, **kwargs):
  """Returns (clone's loss, its gradients) computed on the clone's device."""
  sum_loss = _gather_clone_loss(clone, num_clones, regularization_losses)
  clone_grad = None
  if sum_loss is not None:
    with tf.device(clone.device):
      clone_grad = optimizer.compute_gradients(sum_loss, **kwargs)
  return sum_loss, clone_grad


def _replica_var_lists(clones, kwargs):
  """Each clone's `var_list` when every clone has its own copies: clone 0's (given, or
  every trainable variable) mapped to clone i's copies."""
  var_list = kwargs.get('var_list')
  if var_list is None:
    var_list = tf.trainable_variables() + tf.get_collection(
        tf.GraphKeys.TRAINABLE_RESOURCE_VARIABLES)
    var_list = list({id(var): var for var in var_list}.values())
  return [replicated.copies_of(var_list, index) for index in range(len(clones))]


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """Computes every clone's gradients and sums them (the mean, given the 1/N losses).

  Args:
    clones: list of `Clone` from `create_clones`.
    optimizer: a `tf.train.Optimizer`; only `compute_gradients` is called.
    regularization_losses: added once to the first clone; None means the
      REGULARIZATION_LOSSES collection.
    **kwargs: passed to `optimizer.compute_gradients` (e.g. `var_list`).

  Returns:
    (total_loss, grads_and_vars): the scalar total loss over all clones, and a list of
    (summed gradient, variable) for variables with a gradient. With replicated clones
    (`replicated=True`) the gradients are not summed: each clone's list of (gradient,
    its own copy), concatenated, for `replicated.all_reduce`.
  """
  replicas = kwargs.pop('replicated', False)
  grads_and_vars = []
  clones_losses = []
  num_clones = len(clones)
  var_lists = _replica_var_lists(clones, kwargs) if replicas else [None] * num_clones
  if regularization_losses is None:
    regularization_losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  for clone, var_list in zip(clones, var_lists):
    clone_kwargs = dict(kwargs, var_list=var_list) if replicas else kwargs
    with tf.name_scope(clone.scope):
      clone_loss, clone_grad = _optimize_clone(
          optimizer, clone, num_clones, regularization_losses, **clone_kwargs)
      if clone_loss is not None:
        clones_losses.append(clone_loss)
        grads_and_vars.append(clone_grad)
      if clone_loss is not None:
        # Only the first clone with a loss carries the regularization.
        regularization_losses = None
  total_loss = tf.add_n(clones_losses, name='total_loss') if clones_losses else None
  if replicas:
    return total_loss, _with_gradients_in_every_clone(grads_and_vars)
  return total_loss, _sum_clones_gradients(grads_and_vars)


def _with_gradients_in_every_clone(clone_grads):
  """The clones' (gradient, copy) lists concatenated, keeping the positions where
  every clone has a gradient (the copies are the same model)."""
  keep = [all(grads[i][0] is not None for grads in clone_grads)
          for i in range(len(clone_grads[0]))]
  return [pair for grads in clone_grads for pair, kept in zip(grads, keep) if kept]


def _sum_clones_gradients(clone_grads):
  """Sums each variable's gradient across clones.

  Args:
    clone_grads: one list of (gradient, variable) per clone, variables in the same order.

  Returns:
    A list of (gradient, variable), skipping variables no clone has a gradient for.
    Sparse gradients (IndexedSlices) stay sparse: their slices are concatenated.
  """
  sum_grads = []
  for grad_and_vars in zip(*clone_grads):
    var = grad_and_vars[0][1]
    grads = [g for g, _ in grad_and_vars if g is not None]
    if not grads:
      continue
    if len(grads) == 1:
      sum_grads.append((grads[0], var))
    elif all(isinstance(g, tf.IndexedSlices) for g in grads):
      sum_grads.append((tf.IndexedSlices(
          tf.concat([g.values for g in grads], 0),
          tf.concat([g.indices for g in grads], 0),
          grads[0].dense_shape), var))
    else:
      sum_grads.append((tf.add_n([tf.convert_to_tensor(g) for g in grads],
                                 name=var.op.name + '/sum_grads'), var))
  return sum_grads


def _add_gradients_summaries(grads_and_vars):
  summaries = []
  for grad, var in grads_and_vars:
    if grad is None:
      continue
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    summaries.append(tf.summary.histogram(var.op.name + '/gradient', values))
    summaries.append(tf.summary.scalar(var.op.name + '/gradient_norm', tf.norm(values)))
  return summaries


def _clip_gradients(grads_and_vars, clip_norm, summarize=True):
  """Returns (clipped grads_and_vars, summary of the global norm before clipping, or
  None when not `summarize`)."""
  grads, variables = zip(*grads_and_vars)
  clipped, global_norm = tf.clip_by_global_norm(list(grads), clip_norm)
  summary = tf.summary.scalar('gradient_global_norm', global_norm) if summarize else None
  return list(zip(clipped, variables)), summary


def _build_train_op(config, clones, optimizer, global_step, update_ops, options):
  """Gradients (all-reduced when replicated), clipping, update, moving averages.

  Returns:
    (train_op, total_loss, summaries made here).
  """
  var_list = options.var_list() if callable(options.var_list) else options.var_list
  if var_list is not None and not list(var_list):
    raise ValueError('variables_to_train is empty: no variable would be trained')
  kwargs = {'var_list': list(var_list)} if var_list is not None else {}
  if getattr(config, 'replicated', False):
    kwargs['replicated'] = True
  total_loss, grads_and_vars = options.optimize_fn(clones, optimizer, **kwargs)
  if not grads_and_vars:
    raise ValueError('no variable receives a gradient from the clones\' losses: check '
                     'that model_fn adds its loss to the LOSSES collection and that '
                     'variables_to_train is not empty')
  per_clone = [grads_and_vars]
  if kwargs.get('replicated'):
    per_clone = replicated.split_by_clone(replicated.all_reduce(config, grads_and_vars),
                                          len(clones))
  summaries = []
  with tf.device(config.summary_device()):
    if options.summarize_gradients:
      summaries += _add_gradients_summaries(per_clone[0])
  per_clone, norm_summary = _clip_or_measure(per_clone, options.clip_gradient_norm)
  summaries.append(norm_summary)
  grad_updates = optimizer.apply_gradients(
      [pair for clone in per_clone for pair in clone], global_step=global_step)
  updates = [grad_updates] + list(update_ops)
  if options.moving_average is not None:
    # Averages follow the weights *after* this step's update.
    with tf.control_dependencies([grad_updates]):
      updates.append(options.moving_average.apply(options.moving_average_variables))
  with tf.control_dependencies([tf.group(*updates)]):
    train_op = tf.identity(total_loss, name='train_op')
  return train_op, total_loss, summaries


def _clip_or_measure(per_clone, clip_norm):
  """-> (each clone's gradients clipped to the global norm `clip_norm` when > 0, the
  summary of the first clone's global norm before clipping). One list per clone when
  replicated (each clone clips its own, identical, all-reduced gradients), else one."""
  if clip_norm:
    clipped = [_clip_gradients(grads, clip_norm, summarize=index == 0)
               for index, grads in enumerate(per_clone)]
    return [grads for grads, _ in clipped], clipped[0][1]
  return per_clone, tf.summary.scalar('gradient_global_norm', tf.linalg.global_norm(
      [grad for grad, _ in per_clone[0] if grad is not None]))


DeployOptions = collections.namedtuple('DeployOptions', [
    'summarize_gradients', 'clip_gradient_norm', 'var_list', 'moving_average',
    'moving_average_variables', 'optimize_fn'])


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, clip_gradient_norm=0.0, variables_to_train=None,
           moving_average=None, moving_average_variables=None, optimize_fn=optimize_clones):
  """Builds the clones and, with an optimizer, one train op for all of them.

  Args:
    config: a `DeploymentConfig`.
    model_fn: builds one clone; adds its losses to LOSSES (see `create_clones`).
    args, kwargs: passed to model_fn.
    optimizer: a `tf.train.Optimizer` (a `SyncReplicasOptimizer` wraps one); None builds
      only the losses (evaluation).
    summarize_gradients: add a histogram and norm summary per gradient.
    clip_gradient_norm: if > 0, clip the summed gradients to this global norm.
    variables_to_train: variables to compute gradients for (None: all trainable), or a
      callable returning them, called after the clones (and so the variables) exist.
    moving_average: an optional `tf.train.ExponentialMovingAverage`, applied after each
      update to `moving_average_variables` (default: slim.get_model_variables()).
    optimize_fn: (clones, optimizer, **kwargs) -> (total_loss, grads_and_vars), as
      `optimize_clones`; `deployment.accumulation` passes one adding micro-batches.

  Returns:
    A `DeployedModel`. The global step is created (or reused) on the variables device.
  """
  summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
  with tf.device(config.variables_device()):
    global_step = tf.train.get_or_create_global_step()
  clones = create_clones(config, model_fn, args, kwargs)
  with tf.device(config.optimizer_device()):
    if optimizer is None:
      train_op, total_loss = None, _gather_losses_only(clones)
    else:
      options = DeployOptions(summarize_gradients, clip_gradient_norm, variables_to_train,
                              moving_average, moving_average_variables, optimize_fn)
      train_op, total_loss, own_summaries = _train_op(config, clones, optimizer,
                                                      global_step, options)
      summaries |= set(own_summaries)
  summary_op = _summary_op(config, clones, summaries, total_loss)
  return DeployedModel(train_op, summary_op, total_loss, clones)


def _train_op(config, clones, optimizer, global_step, options):
  """_build_train_op with the first clone's UPDATE_OPS and the moving averages' default
  variables (slim's model variables); replicated, the copies are then made to follow
  clone 0 (`replicated.keep_one_copy`, `replicated.sync_op`)."""
  if options.moving_average is not None and options.moving_average_variables is None:
    options = options._replace(moving_average_variables=slim.get_model_variables())
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
  built = _build_train_op(config, clones, optimizer, global_step, update_ops, options)
  if getattr(config, 'replicated', False):
    replicated.keep_one_copy()
    replicated.sync_op(config)
  return built


def _summary_op(config, clones, summaries, total_loss):
  """The merged summary op of `summaries` (a set: those from before the clones and the
  optimizer's), the first clone's, every clone's losses and the total loss; None if none."""
  with tf.device(config.summary_device()):
    summaries |= set(tf.get_collection(tf.GraphKeys.SUMMARIES, clones[0].scope))
    # Every clone's loss, not only the first's: a clone that diverges shows.
    summaries |= {summary for clone in clones[1:]
                  for summary in tf.get_collection(tf.GraphKeys.SUMMARIES, clone.scope)
                  if '/Losses/' in summary.name}
    if total_loss is not None:
      summaries.add(tf.summary.scalar('Losses/total_loss', total_loss))
    return (tf.summary.merge(sorted(summaries, key=lambda s: s.name), name='summary_op')
            if summaries else None)


def _gather_losses_only(clones):
  """Evaluation: the total loss over all clones, regularization added once."""
  clones_losses = []
  regularization_losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  for clone in clones:
    with tf.name_scope(clone.scope):
      clone_loss = _gather_clone_loss(clone, len(clones), regularization_losses)
      if clone_loss is not None:
        clones_losses.append(clone_loss)
        regularization_losses = None
  return tf.add_n(clones_losses, name='total_loss') if clones_losses else None
