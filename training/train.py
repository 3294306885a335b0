"""`train(config)`: the whole training job, from a checked TrainConfig to a checkpoint.

Wiring only: the input of the dataset's kind from `datasets.inputs.input_factory` (built on
`inputs_device()`, each batch finished on its clone: `training.train_input`), the network from
`nets/`, clones and the train op from `deployment.model_deploy.deploy` (through
`deployment.accumulation.deploy`, which adds --num_micro_batches), and the loop is
`training.session_loop.supervised_train` (slim.learning.train's Supervisor loop, kept here
so that cluster jobs end cleanly, with nothing beside the steps) with
`training.progress.ProgressStep`, which fetches the summaries with the step. Only the chief
(task 0) writes checkpoints (between steps) and summaries; with --precise_bn_batches it
recomputes the batch-norm statistics (`training.precise_bn`) before the final checkpoint.
"""

import collections
import functools
import os

from absl import logging

from deployment import accumulation, replicated, sync_replicas, worker_stats, xla
from deployment.cluster import ps_cluster
from deployment.loss_scale import DynamicLossScale, LossScaleOptimizer, SkipNonFiniteUpdates
from deployment.session.precision_options import uses_loss_scale
from deployment.session.session_config import make_session_config
from tf_compat import tf, slim
from checkpoints import paths, restore
from datasets.formats import damaged_shards
from datasets.inputs.service_client import naming_service_errors
from resolve.network import build_network
from training import (cluster_agreement, divergence, optimization, precise_bn,
                      repeatability, run_record, start_lines, summaries, summary_gate,
                      train_input)
from training.cadence import Cadence
from training.draws import Draws
from training.example_ids import ExampleIds
from training.progress import ClusterReading, InputWatch, ProgressLines, ProgressStep, \
    SummaryWriting
from training.loop_parts import ClusterRole, LoopGraph, LoopHooks, Saving
from training.session_loop import LoopTimeouts, supervised_train
from training.setup import check_train_config

__all__ = ['train', 'TrainResult', 'build_training_graph', 'SYNC_TRACE_FILE']

SYNC_TRACE_FILE = 'sync_trace.tsv'  # --sync_trace: deployment.sync_replicas.read_trace.

TrainResult = collections.namedtuple(
    'TrainResult', ['global_step', 'loss', 'examples_per_sec', 'checkpoint',
                    'local_steps', 'worker_steps', 'stale_gradients'],
    defaults=(None, None, None))
TrainResult.__doc__ += ('; local_steps: the steps this process ran; worker_steps and '
                        'stale_gradients: in a cluster, the steps of this worker the '
                        'parameter servers counted and, of those, the ones whose gradient '
                        'no synchronous update took (deployment.worker_stats)')

TrainGraph = collections.namedtuple(
    'TrainGraph', ['train_op', 'summaries', 'global_step', 'optimizer', 'init_fn',
                   'learning_rate', 'input_wait', 'worker_stats', 'progress_scalars',
                   'skips', 'precise_bn', 'agreement', 'data_workers', 'stop_vote'])


def _network_fn(setup):
  """The network, computing in --mixed_precision (float32 inputs, logits, variables)."""
  return build_network(setup.network)


def _make_clone_fn(setup, iterator, network_fn, input_wait, draws):
  """model_fn for create_clones: draw a batch, run the net, add the losses."""
  config = setup.config

  def clone_fn():
    inputs, labels = train_input.clone_inputs(setup, iterator, input_wait, draws)
    # --xla compiles the network, the loss and (inheriting the scope) their gradients.
    with xla.jit_scope(config.xla):
      logits, end_points = network_fn(inputs)
      _add_losses(config, logits, labels, end_points)
    summaries.add_clone_summaries(logits, labels, end_points, config.summarize_activations)
    return end_points
  return clone_fn


def _add_losses(config, logits, labels, end_points):
  onehot = tf.one_hot(labels, depth=logits.get_shape().as_list()[-1])
  if 'AuxLogits' in end_points:
    tf.losses.softmax_cross_entropy(onehot, end_points['AuxLogits'], weights=0.4,
                                    label_smoothing=config.label_smoothing,
                                    scope='aux_loss')
  tf.losses.softmax_cross_entropy(onehot, logits, label_smoothing=config.label_smoothing)


def _variables_to_train(config):
  if not config.trainable_scopes:
    return None
  return restore.filter_by_scopes(
      tf.trainable_variables(), config.trainable_scopes, 'trainable_scopes')


def _fine_tune_init_fn(setup):
  """Restore from --checkpoint_path, unless train_dir already holds a checkpoint."""
  config = setup.config
  if setup.checkpoint_file is None:
    return None
  if setup.resume_checkpoint:
    logging.info('Ignoring --checkpoint_path: %s already holds %s, resuming from it',
                 config.train_dir, setup.resume_checkpoint)
    return None
  plan = restore.plan_fine_tuning(
      setup.checkpoint_file, slim.get_model_variables(),
      exclude_scopes=config.checkpoint_exclude_scopes,
      ignore_missing_vars=config.ignore_missing_vars, name_map=setup.checkpoint_name_map)
  naming = getattr(setup.checkpoint_name_map, 'checkpoint_naming', None)
  if naming is not None:
    logging.info('Checkpoint names: %s (%s), mapped to %s', naming.naming, naming.scope,
                 config.model_name)
  restore.log_restore_report(plan)
  return restore.make_init_fn(plan)


def _agreement(setup):
  """In a cluster, the chief's settings every worker checks before its first step: on
  the parameter servers, or without them broadcast before the session."""
  config = setup.config
  if not config.master:
    return None
  settings = cluster_agreement.agreed_settings(setup)
  if _owns_model(config):
    return cluster_agreement.BroadcastAgreement(settings, setup.deploy_config, config.task,
                                                config.is_chief)
  return cluster_agreement.ClusterAgreement(
      settings, setup.deploy_config.variables_device(), config.task, config.is_chief)


def _owns_model(config):
  """A worker of a cluster without parameter servers keeps (and starts) its own copy."""
  return bool(config.master) and config.num_ps_tasks == 0


def _worker_stats(config, global_step):
  """The parameter servers' per-worker counters (deployment.worker_stats), or None alone
  or without parameter servers (every worker runs every step)."""
  if not config.master or _owns_model(config):
    return None
  return worker_stats.WorkerStats(config.worker_replicas, config.task, global_step.device)


def _optimizer(setup, global_step, moving_average, stats):
  """-> (optimizer: the sync optimizer with --sync_replicas, learning rate, the float16
  loss scale or None); with a loss scale the update skips non-finite gradients."""
  config = setup.config
  deploy_config = setup.deploy_config
  loss_scale = None
  with tf.device(deploy_config.optimizer_device()):
    learning_rate = optimization.configure_learning_rate(
        config, setup.dataset.num_samples, global_step)
    optimizer = optimization.configure_optimizer(config, learning_rate)
    if uses_loss_scale(config.mixed_precision):
      loss_scale = DynamicLossScale(config.loss_scale, config.loss_scale_growth_steps)
      optimizer = SkipNonFiniteUpdates(optimizer, loss_scale)
    if config.sync_replicas:
      trace = (os.path.join(os.path.abspath(config.train_dir), SYNC_TRACE_FILE)
               if config.sync_trace and config.is_chief else None)
      optimizer = sync_replicas.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=config.replicas_to_aggregate,
          total_num_replicas=config.worker_replicas, worker_index=config.task,
          variable_averages=moving_average,
          # Called once the clones exist: the model variables do not yet.
          variables_to_average=slim.get_model_variables if moving_average else None,
          trace_path=trace, worker_stats=stats)
  with tf.device(deploy_config.summary_device()):
    tf.summary.scalar('learning_rate', learning_rate)
    tf.summary.scalar('global_batch_size', tf.constant(setup.global_batch))
  return optimizer, learning_rate, loss_scale


def _deploy_optimizer(config, optimizer, loss_scale):
  """What deploy computes gradients with: float16's loss scaling around `optimizer`, and
  with --xla the gradients built in the clones' XLA scope (deployment.xla)."""
  if loss_scale is not None:
    optimizer = LossScaleOptimizer(optimizer, loss_scale)
  return xla.CompiledGradients(optimizer) if config.xla else optimizer


def _progress_scalars(loss_scale):
  """(tag, label, tensor) of the loss scale for the progress lines and TensorBoard."""
  if loss_scale is None:
    return ()
  return (('loss_scale', 'loss scale', loss_scale.scale),
          ('loss_scale/skipped_steps', 'skipped (overflow)', loss_scale.skipped_steps))


def _deploy(setup, clone_fn, optimizer, moving_average):
  """The clones and their train op (accumulation.deploy: --num_micro_batches); a
  synchronous optimizer applies the moving average itself."""
  config = setup.config
  # Variables exist only once the clones are built: scopes are resolved then.
  variables_to_train = None
  if config.trainable_scopes:
    variables_to_train = lambda: _variables_to_train(config)
  return accumulation.deploy(
      setup.deploy_config, clone_fn, num_micro_batches=config.num_micro_batches,
      optimizer=optimizer, summarize_gradients=config.summarize_gradients,
      clip_gradient_norm=config.clip_gradient_norm,
      variables_to_train=variables_to_train,
      moving_average=None if config.sync_replicas else moving_average)


def _with_variable_histograms(deploy_config, summary_op):
  """`summary_op` merged with a histogram of every model variable."""
  with tf.device(deploy_config.summary_device()):
    # A scope of their own keeps the tags equal to the variable names (no '_1' suffix).
    histograms = [tf.summary.histogram('model_variables/' + v.op.name, v)
                  for v in slim.get_model_variables()]
    return tf.summary.merge([summary_op] + histograms)


def build_training_graph(setup):
  """Builds inputs, clones, losses, optimizer and summaries in the default graph."""
  config = setup.config
  deploy_config = setup.deploy_config
  if config.random_seed is not None:  # Unset: the graph's seed is left as it is.
    tf.set_random_seed(repeatability.graph_seed(config))
  with tf.device(deploy_config.variables_device()):
    global_step = tf.train.get_or_create_global_step()
  repeatability.seed_dropout(config, global_step)
  moving_average = None
  if config.moving_average_decay:
    moving_average = tf.train.ExponentialMovingAverage(config.moving_average_decay,
                                                       global_step)
  stats = _worker_stats(config, global_step)
  optimizer, learning_rate, loss_scale = _optimizer(setup, global_step,
                                                    moving_average, stats)
  skips = train_input.skip_counter(setup)
  iterator = train_input.input_iterator(setup, skips)
  input_wait = summaries.InputWait()
  draws = Draws(config.num_clones, ExampleIds(config.train_dir)
                if setup.input_settings.with_ids else None)
  clone_fn = _make_clone_fn(setup, iterator, _network_fn(setup), input_wait, draws)
  deployed = _deploy(setup, clone_fn, _deploy_optimizer(config, optimizer, loss_scale),
                     moving_average)
  summary_op = _with_variable_histograms(deploy_config, deployed.summary_op)
  train_op = input_wait.wrap(deployed.train_op)  # creates input_wait.total
  if draws.example_ids is not None:
    train_op = draws.example_ids.wrap(train_op, global_step)
  if stats is not None and not config.sync_replicas:
    train_op = stats.wrap(train_op)  # A synchronous step counts itself (it knows more).
  precise = (precise_bn.PreciseBatchNorm(deployed.clones, config.precise_bn_batches)
             if config.precise_bn_batches else None)
  scalars = _progress_scalars(loss_scale)
  # What every step fetches (training.progress): the summaries take these as they are.
  step_fetches = [train_op, learning_rate] + [tensor for _, _, tensor in scalars]
  with tf.device(deploy_config.summary_device()):
    gated = summary_gate.gate(summary_op, step_fetches)
  return TrainGraph(train_op, gated, global_step, optimizer,
                    _fine_tune_init_fn(setup), learning_rate, input_wait.total,
                    stats, scalars, skips, precise,
                    _agreement(setup), train_input.data_workers(setup),
                    replicated.StopVote(deploy_config) if _owns_model(config) else None)


def _cluster_progress(config, stats):
  """The chief's view of its workers' counters (its progress lines), or None."""
  if stats is None or not config.is_chief:
    return None
  return worker_stats.ClusterProgress(config.worker_replicas, config.sync_replicas)


def _loop_timeouts(config):
  return LoopTimeouts(recovery_wait_secs=config.recovery_wait_secs,
                      startup_timeout_secs=config.startup_timeout_secs,
                      step_timeout_secs=config.step_timeout_secs,
                      stop_grace_secs=config.stop_grace_secs)


def _finish_fn(graph, step_fn):
  """What the chief runs after the last step of a finished run: precise batch norm (not
  for a run that stops on damaged data)."""
  if graph.precise_bn is None:
    return None

  def finish(sess, beat):
    if not step_fn.stopped_for_damage:
      graph.precise_bn.run(sess, beat)
  return finish


def _log_precise_bn_skipped(config, graph, finished):
  if graph.precise_bn is None or graph.precise_bn.ran or not config.is_chief:
    return
  logging.info('Precise batch norm (--precise_bn_batches=%d) not run: %s; the checkpoint '
               'keeps the moving averages of training', config.precise_bn_batches,
               'training was stopped before its end' if not finished else
               'no step trained in this run')


def _run_loop(setup, graph, step_fn, stop_event, absent_tasks):
  """supervised_train with the graph; a damaged record shard ends it with one line
  (DamagedShards: the file, what is wrong, the command that rebuilds it)."""
  config = setup.config
  session_config = make_session_config(
      setup.deploy_config, gpu_allow_growth=config.gpu_allow_growth,
      gpu_memory_fraction=config.gpu_memory_fraction,
      device_filters=ps_cluster.device_filters(setup.deploy_config))
  if config.xla:
    session_config = xla.session_config(session_config)
  with damaged_shards.naming_damaged_shards(setup.dataset.file_pattern), \
      naming_service_errors(setup.input_settings.service):
    return supervised_train(
        LoopGraph(graph.train_op, graph.global_step, graph.init_fn,
                  graph.optimizer if config.sync_replicas else None, graph.worker_stats),
        step_fn, _cluster_role(config, graph, session_config, absent_tasks),
        Saving(config.train_dir, config.save_interval_steps, config.save_interval_secs),
        session_config, _loop_timeouts(config), _loop_hooks(graph, step_fn, stop_event))


def _loop_hooks(graph, step_fn, stop_event):
  """The trainer's LoopHooks: a worker's check of the chief's settings before its first
  step (broadcast ones come before the session: _cluster_role), precise batch norm."""
  agreement = graph.agreement
  broadcast = isinstance(agreement, cluster_agreement.BroadcastAgreement)
  return LoopHooks(
      stop_event, before_steps=agreement.settle if agreement and not broadcast else None,
      finish_fn=_finish_fn(graph, step_fn),
      input_state=graph.data_workers.describe if graph.data_workers else None)


def _cluster_role(config, graph, session_config, absent_tasks):
  """This task's ClusterRole: workers without ps agree on the chief's settings by
  broadcast before their session (cluster_agreement.BroadcastAgreement)."""
  agreement = graph.agreement
  broadcast = isinstance(agreement, cluster_agreement.BroadcastAgreement)
  return ClusterRole(
      config.master, config.is_chief, _owns_model(config), absent_tasks,
      before_session=functools.partial(agreement.settle, config.master, session_config)
      if broadcast else None, stop_vote=graph.stop_vote)


def _progress_step(setup, graph, stop_event):
  """The step function: its progress lines, the input's and the cluster's counters, the
  summaries on --save_summaries_steps/--save_summaries_secs; the first step traced for
  start_lines.first_step."""
  config = setup.config
  return ProgressStep(
      ProgressLines(optimization.examples_per_worker_step(config), config.log_every_n_steps,
                    graph.learning_rate, graph.input_wait, graph.progress_scalars),
      config.max_number_of_steps, stop_event,
      inputs=InputWatch(graph.skips, graph.data_workers),
      cluster=ClusterReading(graph.worker_stats,
                             _cluster_progress(config, graph.worker_stats)),
      summaries=SummaryWriting(graph.summaries, Cadence(setup.save_summaries_steps,
                                                        config.save_summaries_secs)),
      on_first_step=functools.partial(start_lines.first_step, setup))


def train(config, stop_event=None, absent_tasks=None):
  """Checks `config`, builds the graph and trains; returns a TrainResult.

  In a cluster, `absent_tasks()` lists the tasks that do not answer, for the line of a
  task that times out waiting (deployment.cluster.ps_cluster.absent_tasks).

  Raises:
    ConfigError: a user mistake, found before the graph is built (or, for checkpoint
      shape mismatches, before the session starts).
    DataError: a damaged record shard (DamagedShards), or more videos with frames that do
      not decode than --max_damaged_fraction allows (the chief saved a checkpoint first).
  """
  setup = check_train_config(config)
  start_lines.log_startup(setup)
  run_record.start_run(setup)
  with tf.Graph().as_default(), repeatability.determinism(config), \
      repeatability.naming_nondeterministic_ops(config):
    graph = build_training_graph(setup)
    step_fn = _progress_step(setup, graph, stop_event)
    with divergence.naming_divergence(config.train_dir if config.is_chief else None):
      finished = _run_loop(setup, graph, step_fn, stop_event, absent_tasks)
  _log_precise_bn_skipped(config, graph, finished)
  if step_fn.stopped_for_damage:
    raise train_input.too_many_damaged(setup, graph.skips)
  checkpoint = paths.latest_checkpoint(config.train_dir) if config.is_chief else None
  logging.info('Training done at global step %s; %s', step_fn.last_global_step,
               'checkpoint %s' % checkpoint if config.is_chief
               else 'checkpoints are written by the chief (worker 0)')
  if graph.progress_scalars:
    logging.info('Loss scale at the end: %g; steps skipped for overflow: %d',
                 step_fn.last_value('loss_scale') or 0,
                 step_fn.last_value('loss_scale/skipped_steps') or 0)
  run_record.end_run(config, finished, step_fn.last_global_step, checkpoint)
  return TrainResult(step_fn.last_global_step, step_fn.last_loss,
                     step_fn.examples_per_sec or step_fn.overall_examples_per_sec(),
                     checkpoint, step_fn.local_steps, step_fn.worker_steps,
                     step_fn.stale_gradients)
