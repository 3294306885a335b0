"""Checks a whole TrainConfig once, before any graph is built, and resolves what it names.

Every rule fails with a `ConfigError` whose one line names the flag, the bad value and
what would be accepted. The result, `TrainSetup`, carries what the checks looked up
(deployment, dataset split, network, sizes) so the graph code never re-derives them.
"""

import dataclasses
import inspect
import math
import os

from checkpoints import paths, restore
from core.errors import require
from core.params import ConfigError
from datasets.checks import index_check
from datasets.inputs import record_files, service_client
from datasets.inputs.input_factory import get_input
from datasets.inputs.input_settings import InputSettings
from deployment import model_deploy, precision
from deployment.session.gpu_options import check_gpu_options
from deployment.session.precision_options import check_loss_scale, check_mixed_precision
from nets import batch_norm, nets_factory
from resolve import names, sampling
from resolve.network import NetworkSettings, build_network, network_fn
from tf_compat import tf
from training import optimization, optimizer_checks, repeatability

__all__ = ['TrainSetup', 'check_train_config']


@dataclasses.dataclass(frozen=True)
class TrainSetup:
  """What a checked TrainConfig resolves to, and the config itself: the graph code takes
  this one object, so a setting has one road to it."""
  config: object               # the TrainConfig checked
  deploy_config: model_deploy.DeploymentConfig
  dataset: object              # datasets.dataset_factory.DatasetSplit
  network_spec: object         # nets.nets_factory.NetworkSpec
  input: object                # datasets.inputs.input_factory's input of the dataset's kind
  input_settings: InputSettings  # how each clone's batches are made
  network: NetworkSettings     # the network's settings, checked (resolve.network)
  global_batch: int
  steps_per_epoch: float
  checkpoint_file: object      # fine-tune checkpoint prefix, or None
  checkpoint_name_map: object  # fn(variable name) -> checkpoint name, or None (same names)
  resume_checkpoint: object    # latest checkpoint already in train_dir, or None
  save_summaries_steps: int = 0  # --save_summaries_steps resolved (unset: the progress cadence)



def _check_positive_ints(config):
  for name in ('batch_size', 'num_clones', 'num_micro_batches', 'worker_replicas',
               'replicas_to_aggregate', 'num_readers', 'num_preprocessing_threads'):
    value = getattr(config, name)
    require(value >= 1, '--%s=%d must be >= 1' % (name, value))
  for name in ('num_ps_tasks', 'task', 'log_every_n_steps', 'save_summaries_secs',
               'save_interval_secs', 'save_interval_steps', 'labels_offset',
               'precise_bn_batches'):
    value = getattr(config, name)
    require(value >= 0, '--%s=%d must be >= 0' % (name, value))
  if config.save_summaries_steps is not None:
    require(config.save_summaries_steps >= 0, '--save_summaries_steps=%d must be >= 0 (or '
            'unset: every --log_every_n_steps)' % config.save_summaries_steps)
  if config.max_number_of_steps is not None:
    require(config.max_number_of_steps >= 1,
             '--max_number_of_steps=%d must be >= 1 (or unset to train until stopped)'
             % config.max_number_of_steps)


def _resolve_epochs(config, num_samples):
  """--max_number_of_epochs as steps of the global batch (rounded up), in the config the
  graph code reads; a --max_number_of_steps beside it must be that count (a replayed
  flags.cfg holds both), else one line says to give one."""
  epochs = config.max_number_of_epochs
  if epochs is None:
    return config
  require(epochs > 0, '--max_number_of_epochs=%r must be > 0' % epochs)
  steps = max(1, math.ceil(epochs * num_samples / optimization.global_batch_size(config)))
  require(config.max_number_of_steps in (None, steps), '--max_number_of_steps=%s and '
          '--max_number_of_epochs=%g (%d steps of a global batch of %d) disagree; give one'
          % (config.max_number_of_steps, epochs, steps,
             optimization.global_batch_size(config)))
  return dataclasses.replace(config, max_number_of_steps=steps)


def _check_replicas(config):
  require(config.task < config.worker_replicas,
           '--task=%d must be less than --worker_replicas=%d'
           % (config.task, config.worker_replicas))
  # Not read when workers all-reduce (an all-reduce recipe may include a synchronous
  # one's, and run on fewer workers).
  require(config.variable_update == 'replicated'
          or config.replicas_to_aggregate <= config.worker_replicas,
           '--replicas_to_aggregate=%d must be <= --worker_replicas=%d (workers whose '
           'gradients one synchronous step waits for)'
           % (config.replicas_to_aggregate, config.worker_replicas))


def _check_variable_update(config):
  updates = model_deploy.VARIABLE_UPDATES
  require(config.variable_update in updates, '--variable_update=%s is not known; valid: %s'
          % (config.variable_update, ', '.join(updates)))
  require(config.gradient_repacking >= 1, '--gradient_repacking=%d must be >= 1'
          % config.gradient_repacking)
  if config.variable_update == 'replicated':
    require(config.num_ps_tasks == 0, '--variable_update=replicated keeps the variables on '
            'the workers, all-reduced without parameter servers: --num_ps_tasks=%d must be '
            '0 (or use --variable_update=parameter_server)' % config.num_ps_tasks)
    require(not config.sync_replicas, '--sync_replicas is for workers with parameter '
            'servers; with --variable_update=replicated every step all-reduces every '
            'worker\'s gradients, synchronous already: drop --sync_replicas')
  else:
    require(config.worker_replicas == 1 or config.num_ps_tasks > 0, '--worker_replicas=%d '
            'with --num_ps_tasks=0: workers without parameter servers all-reduce their '
            'gradients, which needs --variable_update=replicated (or give parameter servers)'
            % config.worker_replicas)


def _check_input_flags(config, kind):
  """Flags of the other kind of data are refused; --max_damaged_fraction is a fraction."""
  require(0.0 <= config.max_damaged_fraction <= 1.0, '--max_damaged_fraction=%r must be in '
          '[0, 1] (0 stops at the first damaged video)' % config.max_damaged_fraction)
  if kind == names.IMAGE:
    video_only = {'clip_frames': config.clip_frames is not None,
                  'repeat_first_frame': config.repeat_first_frame,
                  'norandom_flip': not config.random_flip}
    for flag, is_set in video_only.items():
      require(not is_set, '--%s is for video datasets; --dataset_name=%s holds images '
               '(their preprocessing decides flips)' % (flag, config.dataset_name))
  else:
    require(config.preprocessing_name is None, '--preprocessing_name=%s is for image '
             'datasets; video clips are cropped and scaled by datasets/inputs/clip_input.py'
             % config.preprocessing_name)


def _service_settings(config):
  """The tf.data service the input comes from (--data_service_*), or None."""
  require(config.data_service_sharding in service_client.SHARDINGS,
          '--data_service_sharding=%r must be one of %s' % (
              config.data_service_sharding, ', '.join(service_client.SHARDINGS)))
  if not config.data_service_address:
    require(config.data_service_sharding == 'dynamic', '--data_service_sharding=%s needs '
            '--data_service_address (host:port of the dispatcher)'
            % config.data_service_sharding)
    return None
  host, _, port = config.data_service_address.rpartition(':')
  require(host and port.isdigit() and 0 < int(port) < 65536, '--data_service_address=%r '
          'must be host:port (the dispatcher of python -m datasets.data_service)'
          % config.data_service_address)
  # One job per run: a cluster's trainers (and a restarted one) share its stream.
  return service_client.ServiceSettings(
      config.data_service_address, config.data_service_sharding,
      'train ' + os.path.abspath(config.train_dir))


def _input_settings(config, spec, kind):
  """InputSettings of one clone's training batches, from the flags and the network."""
  image_size = sampling.crop_size(spec, config.train_image_size, 'train_image_size')
  clip_frames = (sampling.clip_frames(spec, config.clip_frames) if kind == names.VIDEO
                 else None)
  service = _service_settings(config)
  return InputSettings(
      batch_size=config.batch_size, image_size=image_size, num_readers=config.num_readers,
      num_parallel_calls=config.num_preprocessing_threads,
      # With the service, the data workers shard; every trainer builds the same pipeline.
      num_shards=1 if service else config.worker_replicas,
      shard_index=0 if service else config.task, service=service,
      labels_offset=config.labels_offset,
      preprocessing_name=((config.preprocessing_name or spec.preprocessing_name)
                          if kind == names.IMAGE else None),
      clip_frames=clip_frames, random_flip=config.random_flip,
      repeat_first_frame=config.repeat_first_frame,
      seed=repeatability.input_seed(config),
      with_ids=config.log_example_ids and config.is_chief)


def _require_batch_norm(config, spec, flag, what):
  """`flag` (e.g. '--freeze_batch_norm=all') needs a network with batch norm to `what`."""
  parameters = inspect.signature(spec.net_fn).parameters
  with_batch_norm = [name for name in nets_factory.list_networks() if 'freeze_batch_norm'
                     in inspect.signature(nets_factory.get_network_spec(name).net_fn).parameters]
  require('freeze_batch_norm' in parameters, '%s: --model_name=%s has no batch norm to %s; '
          'networks with batch norm: %s'
          % (flag, config.model_name, what, ', '.join(with_batch_norm)))
  if 'use_batch_norm' in parameters:
    uses = (parameters['use_batch_norm'].default if config.use_batch_norm is None
            else config.use_batch_norm)
    require(uses, '%s: --model_name=%s has batch norm only with --use_batch_norm'
            % (flag, config.model_name))


def _check_freeze_batch_norm(config, spec):
  """--freeze_batch_norm names a mode, and the network has batch norm to freeze."""
  mode = config.freeze_batch_norm
  require(mode in batch_norm.FREEZE_MODES, '--freeze_batch_norm=%s is not known; valid: %s'
          % (mode, ', '.join(batch_norm.FREEZE_MODES)))
  if mode != batch_norm.NONE:
    _require_batch_norm(config, spec, '--freeze_batch_norm=%s' % mode, 'freeze')


def _check_precise_bn(config, spec):
  """--precise_bn_batches needs batch norm in training mode: statistics to recompute."""
  if not config.precise_bn_batches:
    return
  flag = '--precise_bn_batches=%d' % config.precise_bn_batches
  _require_batch_norm(config, spec, flag, 'recompute')
  require(config.freeze_batch_norm == batch_norm.NONE, '%s recomputes the moving statistics '
          'that --freeze_batch_norm=%s keeps from the checkpoint; use one or the other'
          % (flag, config.freeze_batch_norm))


def _network(config, dataset):
  """The network's settings from the flags, its extra arguments checked against the
  network's signature."""
  kwargs = {name: getattr(config, name)
            for name in ('use_batch_norm', 'dropout_keep_prob', 'depth_multiplier')
            if getattr(config, name) is not None}
  if config.freeze_batch_norm != batch_norm.NONE:
    kwargs['freeze_batch_norm'] = config.freeze_batch_norm
  if config.dropout_keep_prob is not None:
    require(0.0 < config.dropout_keep_prob <= 1.0, '--dropout_keep_prob=%r must be in '
             '(0, 1]' % config.dropout_keep_prob)
  if config.depth_multiplier is not None:
    require(config.depth_multiplier > 0, '--depth_multiplier=%r must be > 0'
             % config.depth_multiplier)
  settings = NetworkSettings(
      config.model_name, num_classes=dataset.num_classes - config.labels_offset,
      is_training=True, weight_decay=config.weight_decay,
      batch_norm_decay=config.batch_norm_decay, net_kwargs=kwargs,
      mixed_precision=config.mixed_precision)
  network_fn(settings)
  return settings


def _checkpoint_name_map(spec, dataset, checkpoint_file):
  """The network's map to a foreign checkpoint's names (e.g. DeepMind's I3D), or None."""
  if checkpoint_file is None or spec.checkpoint_name_map is None:
    return None
  shapes = restore.checkpoint_shapes(checkpoint_file)
  try:
    return spec.checkpoint_name_map(shapes, modality=getattr(dataset, 'modality', None)
                                    or 'rgb')
  except ValueError as error:
    raise ConfigError('--checkpoint_path=%s: %s' % (checkpoint_file, error)) from None


def _check_input_files(config, dataset):
  """Every worker reads its own shard files (record_files.input_files): a split with
  fewer files than workers is refused here, in one line, not inside graph building. With
  a tf.data service its data workers share the files out instead."""
  served = bool(config.data_service_address)
  try:
    record_files.input_files(dataset, 1 if served else config.worker_replicas,
                             0 if served else config.task)
  except ValueError as error:
    raise ConfigError('--worker_replicas=%d: %s' % (config.worker_replicas, error)) from None


def _check_gpus_for_clones(config, visible_gpus):
  """Several clones without --clone_on_cpu need that many GPUs: soft placement would
  otherwise run them all on the CPU while the run claims GPUs."""
  if config.clone_on_cpu or config.num_clones == 1:
    return
  require(config.num_clones <= visible_gpus,
          '--num_clones=%d needs %d GPUs, but TensorFlow sees %d on this machine; add '
          '--clone_on_cpu to run the clones on logical CPU devices, or use --num_clones=%d'
          % (config.num_clones, config.num_clones, visible_gpus, max(1, visible_gpus)))


def _check_precision(config, settings, network, on_gpu):
  """--mixed_precision needs a network whose ops all have kernels in that dtype on the
  clones' device (checked on a scratch graph of one example, with its gradients)."""
  if config.mixed_precision == 'float32':
    return

  def build():
    frames = [settings.clip_frames] if settings.clip_frames else []
    logits, _ = build_network(dataclasses.replace(network, num_classes=2))(
        tf.zeros([1] + frames + [settings.image_size] * 2 + [3]))
    tf.gradients(tf.reduce_sum(logits), tf.trainable_variables())
  precision.check_kernels(build, config.mixed_precision, 'GPU' if on_gpu else 'CPU',
                          config.model_name)


def _deploy_config(config):
  try:
    return model_deploy.DeploymentConfig(
        num_clones=config.num_clones, clone_on_cpu=config.clone_on_cpu,
        replica_id=config.task, num_replicas=config.worker_replicas,
        num_ps_tasks=config.num_ps_tasks, variable_update=config.variable_update,
        gradient_repacking=config.gradient_repacking)
  except ValueError as error:
    raise ConfigError('deployment flags: %s' % error) from None


def check_train_config(config):
  """Checks every rule and resolves names; returns a TrainSetup. Raises ConfigError."""
  require(config.train_dir, '--train_dir is required: where checkpoints and summaries go')
  _check_positive_ints(config)
  _check_replicas(config)
  _check_variable_update(config)
  optimizer_checks.check_optimizer(config)
  check_gpu_options(config)
  optimizer_checks.check_learning_rate(config)
  check_mixed_precision(config)
  check_loss_scale(config)
  repeatability.check_repeatability(config)
  spec = names.network_spec(config.model_name)
  visible_gpus = len(tf.config.list_physical_devices('GPU'))
  _check_gpus_for_clones(config, visible_gpus)
  deploy_config = _deploy_config(config)
  names.dataset_entry(config.dataset_name)
  dataset = names.dataset_split(config.dataset_name, config.dataset_split_name,
                                config.dataset_dir)
  config = _resolve_epochs(config, dataset.num_samples)
  kind = names.check_network_takes(spec, config.model_name, config.dataset_name, dataset)
  _check_freeze_batch_norm(config, spec)
  _check_precise_bn(config, spec)
  _check_input_flags(config, kind)
  _check_input_files(config, dataset)
  index_check.check_index_counts(dataset)  # DamagedShards (a DataError) for a cut index
  require(config.labels_offset < dataset.num_classes, '--labels_offset=%d must be less '
           'than the number of classes (%d)' % (config.labels_offset, dataset.num_classes))
  checkpoint_file = None
  if config.checkpoint_path:
    checkpoint_file = paths.resolve_checkpoint(config.checkpoint_path)
  settings, network = _input_settings(config, spec, kind), _network(config, dataset)
  _check_precision(config, settings, network,
                   on_gpu=visible_gpus > 0 and not config.clone_on_cpu)
  return TrainSetup(
      config=config, deploy_config=deploy_config, dataset=dataset, network_spec=spec,
      input=get_input(kind), input_settings=settings, network=network,
      global_batch=optimization.global_batch_size(config),
      steps_per_epoch=optimization.steps_per_epoch(config, dataset.num_samples),
      checkpoint_file=checkpoint_file,
      checkpoint_name_map=_checkpoint_name_map(spec, dataset, checkpoint_file),
      resume_checkpoint=paths.latest_checkpoint(config.train_dir),
      save_summaries_steps=(config.log_every_n_steps if config.save_summaries_steps is None
                            else config.save_summaries_steps))
