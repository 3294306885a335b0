"""How evaluation and export cut a video into clips: K clips of T frames, or the first N
frames, centre-cropped; from the flags and the network's defaults."""

import dataclasses
from typing import Optional

from core.params import ConfigError
from nets import nets_factory

__all__ = ['Sampling', 'resolve_sampling']

_DEFAULT_CLIP_FRAMES = 64


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
