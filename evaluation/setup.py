"""Checks a whole EvalConfig once, before any graph, and resolves what it names.

Every rule fails with a `ConfigError` whose one line names the flag, the bad value and
what would be accepted. The result, `EvalSetup`, says whether the dataset holds images
(evaluated by `evaluation.image_eval`) or video clips (`evaluation.video_eval`) and
carries the looked-up splits, network and clip sampling.
"""

import dataclasses
import os
from typing import Optional

from datasets import dataset_factory
from evaluation.config import (DEFAULT_IMAGE_BATCH, DEFAULT_VIDEO_BATCH, EvalConfig,
                               MOVING_AVERAGE_MODES)
from nets import nets_factory
from checkpoints.paths import resolve_checkpoint
from core.params import ConfigError

__all__ = ['Sampling', 'Stream', 'EvalSetup', 'check_eval_config', 'network_kwargs',
           'resolve_sampling']

_DEFAULT_CLIP_FRAMES = 64
_VIDEO_ONLY = ('eval_frames', 'eval_clips', 'clip_frames', 'depth_multiplier',
               'flow_checkpoint_path', 'flow_dataset_dir', 'repeat_first_frame')
_IMAGE_ONLY = ('preprocessing_name',)


@dataclasses.dataclass(frozen=True)
class Sampling:
  """How each video becomes clips: K clips of T frames, or the first N frames.

  Attributes:
    eval_frames: N, or None.
    eval_clips: K, or None (exactly one of the two is set).
    clip_frames: T (used with eval_clips).
    crop_size: side of the centre crop.
  """
  eval_frames: Optional[int]
  eval_clips: Optional[int]
  clip_frames: int
  crop_size: int

  @property
  def frames(self):
    """Frames per clip the network sees."""
    return self.eval_frames or self.clip_frames

  def describe(self):
    if self.eval_frames:
      return 'first %d frames, centre crop %d' % (self.eval_frames, self.crop_size)
    return '%d clip%s x %d frames, centre crop %d' % (
        self.eval_clips, '' if self.eval_clips == 1 else 's', self.clip_frames,
        self.crop_size)

  def as_dict(self):
    if self.eval_frames:
      return {'mode': 'eval_frames', 'frames': self.eval_frames, 'crop_size': self.crop_size}
    return {'mode': 'eval_clips', 'clips': self.eval_clips, 'clip_frames': self.clip_frames,
            'crop_size': self.crop_size}


@dataclasses.dataclass(frozen=True)
class Stream:
  """One model and its records: 'rgb' or 'flow' (or the image model)."""
  name: str
  split: object                 # DatasetSplit
  checkpoint: Optional[str]     # resolved prefix; None with --watch
  checkpoint_flag: str
  data_flag: str                # e.g. 'dataset_dir=/data/ucf101_rgb'


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What a checked EvalConfig resolves to.

  Attributes:
    is_video: the dataset holds clips (else images).
    streams: (Stream,) or, with --fusion, (rgb Stream, flow Stream).
    num_classes: classes of the model (dataset classes - labels_offset).
    batch_size: images or videos per batch.
    sampling: Sampling for videos; None for images.
    use_moving_averages: 'auto', 'true' or 'false' (videos).
  """
  is_video: bool
  streams: tuple
  num_classes: int
  batch_size: int
  sampling: Optional[Sampling]
  use_moving_averages: str


def _require(condition, message):
  if not condition:
    raise ConfigError(message)


def _lookup_split(dataset_name, split_name, dataset_dir, flag):
  _require(dataset_dir, '--%s is required: a directory of converted records' % flag)
  _require(os.path.isdir(dataset_dir), '--%s=%s does not exist' % (flag, dataset_dir))
  try:
    split = dataset_factory.get_dataset(dataset_name, split_name, dataset_dir)
  except ValueError as error:
    bad = ('dataset_split_name=%s' % split_name if 'split' in str(error).split(';')[0]
           else '%s=%s' % (flag, dataset_dir))
    raise ConfigError('--%s: %s' % (bad, error)) from None
  _require(split.num_samples > 0, '--%s=%s: the %s split holds no %s; evaluate a split '
           'with data' % (flag, dataset_dir, split_name,
                          'videos' if split.modality else 'examples'))
  return split


def _check_numbers(config):
  for name in ('batch_size', 'max_num_batches', 'eval_frames', 'eval_clips', 'clip_frames',
               'eval_image_size', 'max_number_of_steps'):
    value = getattr(config, name)
    if value is not None:
      _require(value >= 1, '--%s=%d must be >= 1 (or unset)' % (name, value))
  _require(config.num_preprocessing_threads >= 1, '--num_preprocessing_threads=%d must be '
           '>= 1' % config.num_preprocessing_threads)
  if config.depth_multiplier is not None:
    _require(config.depth_multiplier > 0, '--depth_multiplier=%r must be > 0'
             % config.depth_multiplier)
  if config.moving_average_decay is not None:
    _require(0 < config.moving_average_decay < 1, '--moving_average_decay=%r must be in '
             '(0, 1), e.g. 0.9999' % config.moving_average_decay)
  _require(config.use_moving_averages in MOVING_AVERAGE_MODES, '--use_moving_averages=%s '
           'is not accepted; valid: %s' % (config.use_moving_averages,
                                          ', '.join(MOVING_AVERAGE_MODES)))
  _require(config.watch_timeout > 0, '--watch_timeout=%r must be > 0 seconds'
           % config.watch_timeout)
  _require(config.watch_poll_secs > 0, '--watch_poll_secs=%r must be > 0 seconds'
           % config.watch_poll_secs)


def _check_names(config):
  for flag in ('checkpoint_path', 'dataset_name', 'model_name'):
    _require(getattr(config, flag), '--%s is required' % flag)
  _require(config.model_name in nets_factory.list_networks(), '--model_name=%s is not a '
           'known network; valid: %s' % (config.model_name,
                                         ', '.join(nets_factory.list_networks())))
  _require(config.dataset_name in dataset_factory.list_datasets(), '--dataset_name=%s is '
           'not a known dataset; valid: %s' % (config.dataset_name,
                                               ', '.join(dataset_factory.list_datasets())))


def _refuse_unused(config, names, why):
  defaults = EvalConfig()
  for name in names:
    value = getattr(config, name)
    _require(value == getattr(defaults, name), '--%s=%s %s' % (name, value, why))


def network_kwargs(config):
  """Network arguments the flags set (only those set: the net's defaults otherwise)."""
  kwargs = {}
  if config.depth_multiplier is not None:
    kwargs['depth_multiplier'] = config.depth_multiplier
  if config.use_batch_norm is not None:
    kwargs['use_batch_norm'] = config.use_batch_norm
  return kwargs


def _check_network_kind(config, split):
  """Video data needs a video network (one with default frames), images an image one."""
  spec = nets_factory.get_network_spec(config.model_name)
  wanted = [n for n in nets_factory.list_networks()
            if (nets_factory.get_network_spec(n).default_num_frames is None)
            != bool(split.modality)]
  if split.modality and spec.default_num_frames is None:
    raise ConfigError('--model_name=%s is an image network, but --dataset_name=%s holds %s '
                      'videos; use a video network: %s' % (
                          config.model_name, config.dataset_name, split.modality,
                          ', '.join(wanted)))
  if not split.modality and spec.default_num_frames is not None:
    raise ConfigError('--model_name=%s takes video clips, but --dataset_name=%s holds '
                      'images; use an image network: %s' % (
                          config.model_name, config.dataset_name, ', '.join(wanted)))


def _check_network(config, num_classes):
  try:
    nets_factory.get_network_fn(config.model_name, num_classes=num_classes,
                                **network_kwargs(config))
  except ValueError as error:
    flags = ', '.join('--%s' % name for name in network_kwargs(config))
    raise ConfigError('%s: %s' % (flags or '--model_name=%s' % config.model_name,
                                  error)) from None


def resolve_sampling(config):
  """Sampling from eval_frames, eval_clips, clip_frames, eval_image_size and the network's
  defaults (model_name); config is any object with those fields."""
  if config.eval_frames and config.eval_clips:
    raise ConfigError('--eval_frames=%d and --eval_clips=%d are not accepted together: give '
                      'one (the first N frames, or K clips of --clip_frames) or neither '
                      '(1 clip)' % (config.eval_frames, config.eval_clips))
  if config.eval_frames and config.clip_frames:
    raise ConfigError('--clip_frames=%d applies to --eval_clips; with --eval_frames=%d the '
                      'clip is the first %d frames' % (config.clip_frames, config.eval_frames,
                                                      config.eval_frames))
  spec = nets_factory.get_network_spec(config.model_name)
  clip_frames = config.clip_frames or spec.default_num_frames or _DEFAULT_CLIP_FRAMES
  return Sampling(eval_frames=config.eval_frames,
                  eval_clips=None if config.eval_frames else (config.eval_clips or 1),
                  clip_frames=clip_frames,
                  crop_size=config.eval_image_size or spec.default_image_size)


def _checkpoint(config, flag):
  path = getattr(config, flag)
  if not config.watch:
    return resolve_checkpoint(path, flag)
  _require(not os.path.exists(path) or os.path.isdir(path), '--watch follows a training '
           'directory, but --%s=%s is a file; give the directory (or drop --watch)'
           % (flag, path))
  return None


def _streams(config, split):
  first = Stream(split.modality or 'image', split, _checkpoint(config, 'checkpoint_path'),
                 'checkpoint_path', 'dataset_dir=%s' % config.dataset_dir)
  if not config.fusion:
    _require(not (config.flow_checkpoint_path or config.flow_dataset_dir),
             '--flow_checkpoint_path and --flow_dataset_dir are for two-stream evaluation; '
             'add --fusion (or evaluate the flow model with --checkpoint_path and '
             '--dataset_dir)')
    return (first,)
  _require(not config.watch, '--fusion with --watch is not supported: watch each stream\'s '
           'training directory on its own, then fuse the chosen checkpoints')
  for flag in ('flow_checkpoint_path', 'flow_dataset_dir'):
    _require(getattr(config, flag), '--fusion needs --%s (the flow stream)' % flag)
  _require(split.modality == 'rgb', '--fusion: --dataset_dir=%s holds %s records; give the '
           'rgb records there and the flow records in --flow_dataset_dir'
           % (config.dataset_dir, split.modality))
  flow_split = _lookup_split(config.dataset_name, config.dataset_split_name,
                             config.flow_dataset_dir, 'flow_dataset_dir')
  _require(flow_split.modality == 'flow', '--fusion: --flow_dataset_dir=%s holds %s records, '
           'not flow' % (config.flow_dataset_dir, flow_split.modality))
  _require(flow_split.labels_to_names == split.labels_to_names, '--fusion: the classes of '
           '--flow_dataset_dir=%s (labels.txt) differ from those of --dataset_dir=%s'
           % (config.flow_dataset_dir, config.dataset_dir))
  second = Stream('flow', flow_split, _checkpoint(config, 'flow_checkpoint_path'),
                  'flow_checkpoint_path', 'flow_dataset_dir=%s' % config.flow_dataset_dir)
  return (first, second)


def check_eval_config(config):
  """Checks every rule and resolves names; returns an EvalSetup. Raises ConfigError."""
  _check_names(config)
  _check_numbers(config)
  split = _lookup_split(config.dataset_name, config.dataset_split_name, config.dataset_dir,
                        'dataset_dir')
  is_video = split.modality is not None
  if is_video:
    _refuse_unused(config, _IMAGE_ONLY, 'applies to image datasets; --dataset_name=%s holds '
                   'videos' % config.dataset_name)
    _require(not (config.moving_average_decay and config.use_moving_averages == 'false'),
             '--moving_average_decay asks for the averaged weights, --use_moving_averages='
             'false for the raw ones: give one')
  else:
    _refuse_unused(config, _VIDEO_ONLY + ('fusion', 'use_moving_averages'), 'applies to '
                   'video datasets; --dataset_name=%s holds images' % config.dataset_name)
  _require(config.labels_offset >= 0 and config.labels_offset < split.num_classes,
           '--labels_offset=%d must be in 0..%d' % (config.labels_offset,
                                                    split.num_classes - 1))
  num_classes = split.num_classes - config.labels_offset
  _check_network_kind(config, split)
  _check_network(config, num_classes)
  averages = config.use_moving_averages
  if config.moving_average_decay and averages == 'auto':
    averages = 'true'
  return EvalSetup(
      is_video=is_video, streams=_streams(config, split), num_classes=num_classes,
      batch_size=config.batch_size or (DEFAULT_VIDEO_BATCH if is_video
                                       else DEFAULT_IMAGE_BATCH),
      sampling=resolve_sampling(config) if is_video else None, use_moving_averages=averages)
