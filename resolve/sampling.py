"""Clip sampling, resolved once for train, eval and export, with one default.

A clip's frames are --clip_frames, else the network's (`NetworkSpec.default_num_frames`),
and its crop side the image-size flag, else the network's size: training takes both
from here (`clip_frames`, `crop_size`), and so does evaluation's `Sampling` (K clips of T
frames, or the first N frames, centre-cropped: `resolve_sampling`). `SamplingFlags`
declares eval.py's and export.py's sampling flags once; both configs inherit it.
"""

import dataclasses
from typing import Optional

from core.errors import require
from core.params import ConfigError, param
from datasets.inputs.input_settings import Sampling
from nets import nets_factory

__all__ = ['Sampling', 'SamplingFlags', 'clip_frames', 'crop_size', 'resolve_sampling']


@dataclasses.dataclass(frozen=True)
class SamplingFlags:
  """The flags that choose how evaluation and export cut a video into clips."""
  # Clip sampling.
  eval_frames: Optional[int] = param(
      None, 'Videos: one clip of the first N frames per video (looped if shorter).')
  eval_clips: Optional[int] = param(
      None, 'Videos: K clips of --clip_frames spread uniformly over each video, logits '
      'averaged per video. Unset (and no --eval_frames): 1 clip.')
  clip_frames: Optional[int] = param(
      None, 'Videos: frames per clip for --eval_clips; unset = the network\'s default.')
  eval_image_size: Optional[int] = param(
      None, 'Eval image size (videos: the centre crop\'s side, as --train_image_size '
      'is in training); unset = the network\'s.')


def clip_frames(spec, given, flag='clip_frames'):
  """Frames per clip: `given` (the flag's value), else the network's default frames."""
  frames = spec.default_num_frames if given is None else given
  require(frames is not None, '--%s is needed: the network has no default frames' % flag)
  require(frames >= 1, '--%s=%d must be >= 1' % (flag, frames))
  return frames


def crop_size(spec, given, flag):
  """An image's side or a clip's crop: `given`, else the network's default size."""
  size = spec.default_image_size if given is None else given
  require(size >= 1, '--%s=%d must be >= 1' % (flag, size))
  return size


def resolve_sampling(config):
  """The Sampling of eval_frames, eval_clips, clip_frames, eval_image_size and the
  network's defaults (model_name); config: any object with those fields."""
  if config.eval_frames and config.eval_clips:
    raise ConfigError('--eval_frames=%d and --eval_clips=%d are not accepted together: give '
                      'one (the first N frames, or K clips of --clip_frames) or neither '
                      '(1 clip)' % (config.eval_frames, config.eval_clips))
  if config.eval_frames and config.clip_frames:
    raise ConfigError('--clip_frames=%d applies to --eval_clips; with --eval_frames=%d the '
                      'clip is the first %d frames' % (config.clip_frames, config.eval_frames,
                                                      config.eval_frames))
  spec = nets_factory.get_network_spec(config.model_name)
  crop = crop_size(spec, config.eval_image_size, 'eval_image_size')
  if config.eval_frames:
    return Sampling.first_frames(config.eval_frames, crop)
  return Sampling(eval_frames=None, eval_clips=config.eval_clips or 1,
                  clip_frames=clip_frames(spec, config.clip_frames), crop_size=crop)
