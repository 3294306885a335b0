"""What the trainer says before its graph is built and after its first (traced) step:
topology, batch, model, precision, repeatability; where the clones really ran, the
precision and XLA clusters that ran, and in a cluster what a step moves."""

from absl import logging

from deployment import precision, xla
from deployment.session.precision_options import uses_loss_scale
from deployment.trace import placement, traffic
from tf_compat import tf
from training import optimization, repeatability, run_record

__all__ = ['log_startup', 'first_step']


def log_startup(setup):
  config = setup.config
  deploy_config = setup.deploy_config
  # What the flags ask for; the Placement lines after the first step say where they ran.
  asked = ', '.join(deploy_config.clone_device(i) or 'the default device'
                    for i in range(config.num_clones))
  logging.info('Topology: worker task %d of %d, %d clone(s) asked for %s, %d ps task(s), %s',
               config.task, config.worker_replicas, config.num_clones, asked,
               config.num_ps_tasks, _mode(config))
  logging.info('Batch: %s, %d per worker step, %d global (mean gradient per '
               'update); %d examples in %s/%s, %.1f steps per epoch',
               run_record.per_clone_batch(config),
               optimization.examples_per_worker_step(config),
               setup.global_batch, setup.dataset.num_samples, config.dataset_name,
               config.dataset_split_name, setup.steps_per_epoch)
  inputs = setup.input.describe(setup.input_settings, setup.dataset)
  logging.info('Model %s on %s%s; optimizer %s; learning rate %s', config.model_name,
               inputs, ''.join(', %s=%s' % item for item in setup.network.net_kwargs.items()),
               config.optimizer,
               optimization.describe_schedule(config, setup.dataset.num_samples))
  if config.mixed_precision != 'float32' or config.xla:
    logging.info('Precision: compute in %s, variables and checkpoints in float32%s; XLA %s',
                 config.mixed_precision, (
                     ', dynamic loss scale from %g (doubles after %d good steps)'
                     % (config.loss_scale, config.loss_scale_growth_steps)
                     if uses_loss_scale(config.mixed_precision) else ''),
                 'on' if config.xla else 'off')
  if config.max_number_of_epochs is not None:
    logging.info('Stop: --max_number_of_epochs=%g is %d steps of the global batch of %d '
                 '(%d examples)', config.max_number_of_epochs, config.max_number_of_steps,
                 setup.global_batch, setup.dataset.num_samples)
  logging.info('%s', repeatability.describe(config, setup.input_settings.service))
  if setup.resume_checkpoint:
    logging.info('Resuming from %s', setup.resume_checkpoint)


def _mode(config):
  """How the replicas' variables meet, for the start-up line."""
  if config.variable_update == 'replicated':
    return ('replicated: a copy per clone, gradients all-reduced over %d clone(s) of %d '
            'worker(s) in %d pack(s)' % (config.num_clones, config.worker_replicas,
                                         config.gradient_repacking))
  if config.sync_replicas:
    return 'sync'
  return 'async' if config.worker_replicas > 1 else 'local'


def first_step(setup, run_metadata, summary_writer):
  """After the first (traced) step: where the clones really ran, not where the flags
  asked; the run's flags and topology in TensorBoard (the chief's writer)."""
  config = setup.config
  run_record.write_run_summaries(setup, summary_writer)
  placements = placement.clone_placement(run_metadata, setup.deploy_config)
  for line in placement.describe_placement(placements):
    logging.info('Placement: %s', line)
  if config.mixed_precision != 'float32' or config.xla:
    logging.info('Compute (--mixed_precision=%s%s): %s; %s', config.mixed_precision,
                 ', --xla' if config.xla else '',
                 precision.describe_compute(precision.compute_dtypes(run_metadata)),
                 xla.describe_xla(xla.xla_clusters(run_metadata)))
  for device, clones in placement.shared_devices(placements).items():
    logging.warning('Clones %s all ran on %s: they share one device instead of one each '
                    '(python -m training.doctor says more)',
                    ', '.join(str(c) for c in clones), placement.short_device(device))
  if config.master and config.variable_update == 'replicated':
    logging.info('Traffic: %s', _all_reduce_traffic(config))
  elif config.master:  # In a cluster: what a step moves (docs/cluster.md, capacity).
    logging.info('Traffic: %s', traffic.describe_traffic(
        traffic.step_traffic(run_metadata, config.task)))


def _all_reduce_traffic(config):
  """What a worker moves per step in the ring all-reduce (a step's trace does not show
  collectives' transfers): each sends and receives 2(W-1)/W of the gradients' bytes."""
  megabytes = sum(var.shape.num_elements() * var.dtype.base_dtype.size
                  for var in tf.trainable_variables()) / 1e6
  workers = config.worker_replicas
  return ('the all-reduce of %.2f MB of gradients per step; in a ring of %d workers each '
          'sends and receives about %.2f MB (2(W-1)/W of it), plus the clones\' exchange '
          'inside the worker' % (megabytes, workers, megabytes * 2 * (workers - 1) / workers))
