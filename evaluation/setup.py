"""Checks a whole EvalConfig once, before any graph, and resolves what it names.

Every rule fails with a `ConfigError` whose one line names the flag, the bad value and
what would be accepted. The result, `EvalSetup`, says whether the dataset holds images
(evaluated by `evaluation.image_eval`) or video clips (`evaluation.video_eval`) and
carries the looked-up splits, network and clip sampling. `from_run_records` runs first
(eval.py's main): the fields the user did not give come from the run's record
(resolve.run_record), through `EVAL_LINKS`.
"""

import dataclasses
import os
from typing import Optional

from absl import logging

from checkpoints.paths import resolve_checkpoint
from core.errors import require
from datasets.checks import index_check
from datasets.inputs.input_settings import InputSettings
from deployment.session.gpu_options import check_gpu_options
from deployment.precision import check_inference_kernels
from deployment.session.precision_options import check_mixed_precision
from evaluation.config import (DEFAULT_IMAGE_BATCH, DEFAULT_VIDEO_BATCH, EvalConfig,
                               MOVING_AVERAGE_MODES)
from resolve import names
from resolve.network import NetworkSettings, network_fn
from resolve.run_record import (Link, Settings, changed_fields, check_checkpoint_path,
                                fill_from_record, find_record, no_record)
from resolve.sampling import crop_size, resolve_sampling

__all__ = ['Stream', 'EvalSetup', 'EVAL_LINKS', 'FLOW_LINKS', 'from_run_records',
           'check_eval_config', 'network_kwargs']

# Training flag -> eval flag: what the run trained (model, width, data, clip, crop).
EVAL_LINKS = (
    Link('model_name', 'model_name'), Link('depth_multiplier', 'depth_multiplier'),
    Link('use_batch_norm', 'use_batch_norm'), Link('dataset_name', 'dataset_name'),
    Link('dataset_dir', 'dataset_dir', is_dir=True), Link('labels_offset', 'labels_offset'),
    Link('preprocessing_name', 'preprocessing_name'),
    Link('train_image_size', 'eval_image_size'),
    Link('clip_frames', 'clip_frames', unless=('eval_frames',)),
    Link('repeat_first_frame', 'repeat_first_frame'),
    Link('moving_average_decay', 'moving_average_decay', unless=('use_moving_averages',)))
# --fusion: the flow run's records.
FLOW_LINKS = (Link('dataset_dir', 'flow_dataset_dir', is_dir=True),)

_VIDEO_ONLY = ('eval_frames', 'eval_clips', 'clip_frames', 'depth_multiplier',
               'flow_checkpoint_path', 'flow_dataset_dir', 'repeat_first_frame')
_IMAGE_ONLY = ('preprocessing_name',)


@dataclasses.dataclass(frozen=True)
class Stream:
  """One model and its records: 'rgb' or 'flow' (or the image model)."""
  name: str
  split: object                 # DatasetSplit
  checkpoint: Optional[str]     # resolved prefix; None with --watch
  checkpoint_flag: str
  data_flag: str                # e.g. 'dataset_dir=/data/ucf101_rgb'
  settings: Settings = Settings(None)   # what its run's record gave


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What a checked EvalConfig resolves to, and the config itself: the graph code takes
  this one object, so a setting has one road to it.

  Attributes:
    config: the EvalConfig checked (its fields filled from the run's record).
    kind: names.IMAGE or names.VIDEO, what the dataset holds (decided by the records).
    streams: (Stream,) or, with --fusion, (rgb Stream, flow Stream).
    num_classes: classes of the model (dataset classes - labels_offset).
    input_settings: the InputSettings of every stream's batches (its batch_size: images
      or videos per batch; videos: its sampling).
    use_moving_averages: 'auto', 'true' or 'false' (images: 'true' with
      --moving_average_decay, else 'false').
    network: the NetworkSettings the model is built from (inference mode).
  """
  config: EvalConfig
  kind: str
  streams: tuple
  num_classes: int
  input_settings: InputSettings
  use_moving_averages: str
  network: NetworkSettings

  @property
  def batch_size(self):
    return self.input_settings.batch_size

  @property
  def sampling(self):
    """How each video becomes clips (a Sampling); None for images."""
    return self.input_settings.sampling



def _check_numbers(config):
  for name in ('batch_size', 'max_num_batches', 'log_every_n_batches', 'eval_frames',
               'eval_clips', 'clip_frames', 'eval_image_size', 'max_number_of_steps'):
    value = getattr(config, name)
    if value is not None:
      require(value >= 1, '--%s=%d must be >= 1 (or unset)' % (name, value))
  require(config.num_preprocessing_threads >= 1, '--num_preprocessing_threads=%d must be '
           '>= 1' % config.num_preprocessing_threads)
  if config.depth_multiplier is not None:
    require(config.depth_multiplier > 0, '--depth_multiplier=%r must be > 0'
             % config.depth_multiplier)
  if config.moving_average_decay is not None:
    require(0 < config.moving_average_decay < 1, '--moving_average_decay=%r must be in '
             '(0, 1), e.g. 0.9999' % config.moving_average_decay)
  require(config.use_moving_averages in MOVING_AVERAGE_MODES, '--use_moving_averages=%s '
           'is not accepted; valid: %s' % (config.use_moving_averages,
                                          ', '.join(MOVING_AVERAGE_MODES)))
  require(config.watch_timeout > 0, '--watch_timeout=%r must be > 0 seconds'
           % config.watch_timeout)
  require(config.watch_poll_secs > 0, '--watch_poll_secs=%r must be > 0 seconds'
           % config.watch_poll_secs)
  check_gpu_options(config)


def _check_names(config):
  names.network_spec(config.model_name)
  names.dataset_entry(config.dataset_name)


def _refuse_unused(config, names, why):
  defaults = EvalConfig()
  for name in names:
    value = getattr(config, name)
    require(value == getattr(defaults, name), '--%s=%s %s' % (name, value, why))


def network_kwargs(config):
  """Network arguments the flags set (only those set: the net's defaults otherwise)."""
  kwargs = {}
  if config.depth_multiplier is not None:
    kwargs['depth_multiplier'] = config.depth_multiplier
  if config.use_batch_norm is not None:
    kwargs['use_batch_norm'] = config.use_batch_norm
  return kwargs


def _network(config, num_classes):
  """The network's settings from the flags (inference mode), checked against the network."""
  settings = NetworkSettings(config.model_name, num_classes=num_classes,
                             net_kwargs=network_kwargs(config),
                             mixed_precision=config.mixed_precision)
  flags = ', '.join('--%s' % name for name in settings.net_kwargs)
  network_fn(settings, flags or None)
  return settings


def _check_precision(config, network, is_video):
  """--mixed_precision: a known name, and kernels for every op of the network on this
  device in that dtype."""
  check_mixed_precision(config)
  if is_video:
    sampling = resolve_sampling(config)
    frames, size = [sampling.frames], sampling.crop_size
  else:
    frames, size = [], _image_size(config)
  check_inference_kernels(network_fn(network), config.mixed_precision,
                          [1] + frames + [size, size, 3], config.model_name)


def _checkpoint(config, flag):
  path = getattr(config, flag)
  if not config.watch:
    check_checkpoint_path(path, flag)
    return resolve_checkpoint(path, flag)
  require(not os.path.exists(path) or os.path.isdir(path), '--watch follows a training '
           'directory, but --%s=%s is a file; give the directory (or drop --watch)'
           % (flag, path))
  return None


def from_run_records(config, given=None):
  """-> (config, (Settings of --checkpoint_path's run[, of --flow_checkpoint_path's])):
  the fields not `given` filled from the runs' records (resolve.run_record).

  Args:
    given: names of the fields given explicitly (eval.py: given_flags); None = those that
      differ from EvalConfig's defaults.
  """
  given = changed_fields(config) if given is None else given
  config, first = fill_from_record(config, given, find_record(config.checkpoint_path),
                                   EVAL_LINKS)
  settings = (first,)
  if config.fusion:
    config, flow = fill_from_record(config, given, find_record(config.flow_checkpoint_path),
                                    FLOW_LINKS)
    settings += (flow,)
  for each in settings:
    if each.record:   # without one, eval behaves (and logs) as before
      logging.info('%s', each.describe())
  return config, settings


def _checkpoints(config):
  """{flag: checkpoint prefix (None with --watch)} of each stream, resolved before any
  other flag is asked for: a mistyped run dir is the first error, not the flags its record
  would have given."""
  require(config.checkpoint_path, '--checkpoint_path is required')
  flags = ('checkpoint_path', 'flow_checkpoint_path') if config.fusion else ('checkpoint_path',)
  return {flag: _checkpoint(config, flag) for flag in flags if getattr(config, flag)}


def _streams(config, split, settings, checkpoints):
  first = Stream(split.modality or 'image', split, checkpoints['checkpoint_path'],
                 'checkpoint_path', 'dataset_dir=%s' % config.dataset_dir, settings[0])
  if not config.fusion:
    require(not (config.flow_checkpoint_path or config.flow_dataset_dir),
             '--flow_checkpoint_path and --flow_dataset_dir are for two-stream evaluation; '
             'add --fusion (or evaluate the flow model with --checkpoint_path and '
             '--dataset_dir)')
    return (first,)
  require(not config.watch, '--fusion with --watch is not supported: watch each stream\'s '
           'training directory on its own, then fuse the chosen checkpoints')
  for flag in ('flow_checkpoint_path', 'flow_dataset_dir'):
    require(getattr(config, flag), '--fusion needs --%s (the flow stream)' % flag)
  require(split.modality == 'rgb', '--fusion: --dataset_dir=%s holds %s records; give the '
           'rgb records there and the flow records in --flow_dataset_dir'
           % (config.dataset_dir, split.modality))
  flow_split = names.dataset_split(config.dataset_name, config.dataset_split_name,
                                   config.flow_dataset_dir, 'flow_dataset_dir', True)
  require(flow_split.modality == 'flow', '--fusion: --flow_dataset_dir=%s holds %s records, '
           'not flow' % (config.flow_dataset_dir, flow_split.modality))
  require(flow_split.labels_to_names == split.labels_to_names, '--fusion: the classes of '
           '--flow_dataset_dir=%s (labels.txt) differ from those of --dataset_dir=%s'
           % (config.flow_dataset_dir, config.dataset_dir))
  second = Stream('flow', flow_split, checkpoints['flow_checkpoint_path'],
                  'flow_checkpoint_path', 'flow_dataset_dir=%s' % config.flow_dataset_dir,
                  settings[1] if len(settings) > 1 else Settings(None))
  return (first, second)


def check_eval_config(config, settings=None):
  """Checks every rule and resolves names; returns an EvalSetup. Raises ConfigError.

  settings: from_run_records' (None: a config without records, every linked field the
  flag's or the default)."""
  settings = settings or (no_record(config, changed_fields(config), EVAL_LINKS),
                          no_record(config, changed_fields(config), FLOW_LINKS))
  checkpoints = _checkpoints(config)
  _check_names(config)
  _check_numbers(config)
  split = names.dataset_split(config.dataset_name, config.dataset_split_name,
                              config.dataset_dir, 'dataset_dir', need_examples=True)
  kind = names.check_network_takes(names.network_spec(config.model_name),
                                   config.model_name, config.dataset_name, split)
  is_video = kind == names.VIDEO
  if is_video:
    _refuse_unused(config, _IMAGE_ONLY, 'applies to image datasets; --dataset_name=%s holds '
                   'videos' % config.dataset_name)
    require(not (config.moving_average_decay and config.use_moving_averages == 'false'),
             '--moving_average_decay asks for the averaged weights, --use_moving_averages='
             'false for the raw ones: give one')
  else:
    _refuse_unused(config, _VIDEO_ONLY + ('fusion', 'use_moving_averages'), 'applies to '
                   'video datasets; --dataset_name=%s holds images' % config.dataset_name)
  require(config.labels_offset >= 0 and config.labels_offset < split.num_classes,
           '--labels_offset=%d must be in 0..%d' % (config.labels_offset,
                                                    split.num_classes - 1))
  num_classes = split.num_classes - config.labels_offset
  network = _network(config, num_classes)
  _check_precision(config, network, is_video)
  averages = config.use_moving_averages
  if config.moving_average_decay and averages == 'auto':
    averages = 'true'
  elif not is_video:   # images follow --moving_average_decay alone
    averages = 'false'
  streams = _streams(config, split, settings, checkpoints)
  for stream in streams:
    index_check.check_index_counts(stream.split)  # DamagedShards for a cut index
  return EvalSetup(config=config, kind=kind, streams=streams, num_classes=num_classes,
                   input_settings=_input_settings(config, is_video),
                   use_moving_averages=averages, network=network)


def _image_size(config):
  return crop_size(names.network_spec(config.model_name), config.eval_image_size,
                   'eval_image_size')


def _input_settings(config, is_video):
  """How evaluation reads a split (the input's `eval_dataset`): every example once, in
  order, none dropped."""
  common = dict(num_readers=1, num_parallel_calls=config.num_preprocessing_threads,
                num_epochs=1, drop_remainder=False, labels_offset=config.labels_offset)
  if is_video:
    return InputSettings.for_sampling(
        resolve_sampling(config), batch_size=config.batch_size or DEFAULT_VIDEO_BATCH,
        repeat_first_frame=config.repeat_first_frame, **common)
  spec = names.network_spec(config.model_name)
  return InputSettings(batch_size=config.batch_size or DEFAULT_IMAGE_BATCH,
                       image_size=_image_size(config),
                       preprocessing_name=config.preprocessing_name or spec.preprocessing_name,
                       **common)
