"""The settings of an input pipeline, typed: `InputSettings` (how one clone's batches are
made) and `Sampling` (how evaluation and serving cut a video into clips).

The builders (`image_input.build_image_dataset`, `clip_input.build_clip_dataset`) take
one InputSettings instead of a keyword per setting; the entries' setups fill it once
(`training.setup`, `evaluation.setup`, `serving`). A Sampling is resolved once
(`resolve.sampling`), carried in InputSettings.sampling, written to an export's
`model_info.json` with `to_json` and read back with `from_json`, which refuses an
unknown or incomplete one in one line rather than guessing a default.
"""

import dataclasses
from typing import Optional

from datasets.inputs.record_files import check_positive
from datasets.inputs.service_client import ServiceSettings

__all__ = ['Sampling', 'InputSettings']

_EVAL_FRAMES, _EVAL_CLIPS = 'eval_frames', 'eval_clips'


@dataclasses.dataclass(frozen=True)
class Sampling:
  """How each video becomes clips for evaluation: K clips of T frames, or the first N.

  Attributes:
    eval_frames: N, or None.
    eval_clips: K, or None (exactly one of the two is set).
    clip_frames: T, frames per clip (N with eval_frames).
    crop_size: side of the centre crop.
  """
  eval_frames: Optional[int]
  eval_clips: Optional[int]
  clip_frames: int
  crop_size: int

  def __post_init__(self):
    check_positive(**{name: value for name, value in dataclasses.asdict(self).items()
                      if value is not None or name in ('clip_frames', 'crop_size')})
    if (self.eval_frames is None) == (self.eval_clips is None):
      raise ValueError('Sampling: exactly one of eval_frames=%r and eval_clips=%r is set'
                       % (self.eval_frames, self.eval_clips))
    if self.eval_frames is not None and self.clip_frames != self.eval_frames:
      raise ValueError('Sampling: with eval_frames=%d a clip is those frames, not '
                       'clip_frames=%d' % (self.eval_frames, self.clip_frames))

  @classmethod
  def first_frames(cls, frames, crop_size):
    """One clip of the first `frames` frames."""
    return cls(eval_frames=frames, eval_clips=None, clip_frames=frames, crop_size=crop_size)

  @property
  def frames(self):
    """Frames per clip the network sees."""
    return self.clip_frames

  def describe(self):
    if self.eval_frames:
      return 'first %d frames, centre crop %d' % (self.eval_frames, self.crop_size)
    return '%d clip%s x %d frames, centre crop %d' % (
        self.eval_clips, '' if self.eval_clips == 1 else 's', self.clip_frames,
        self.crop_size)

  def to_json(self):
    """model_info.json's and the eval report's "sampling" object."""
    if self.eval_frames:
      return {'mode': _EVAL_FRAMES, 'frames': self.eval_frames, 'crop_size': self.crop_size}
    return {'mode': _EVAL_CLIPS, 'clips': self.eval_clips, 'clip_frames': self.clip_frames,
            'crop_size': self.crop_size}

  @classmethod
  def from_json(cls, content, where):
    """The Sampling `to_json` wrote; ValueError (one line naming `where`) for anything
    else: a missing key, an unknown mode, a value that is not a positive integer."""
    modes = {_EVAL_FRAMES: ('frames', 'crop_size'),
             _EVAL_CLIPS: ('clips', 'clip_frames', 'crop_size')}
    mode = content.get('mode') if isinstance(content, dict) else None
    if mode not in modes:
      raise ValueError('%s: "sampling" %s is not one this version reads (a "mode" of %s); '
                       're-export the model' % (where, _compact(content), ' or '.join(modes)))
    missing = [key for key in modes[mode] if key not in content]
    if missing:
      raise ValueError('%s: "sampling" lacks %s; re-export the model'
                       % (where, ', '.join(missing)))
    try:
      if mode == _EVAL_FRAMES:
        return cls.first_frames(content['frames'], content['crop_size'])
      return cls(eval_frames=None, eval_clips=content['clips'],
                 clip_frames=content['clip_frames'], crop_size=content['crop_size'])
    except ValueError as error:
      raise ValueError('%s: "sampling": %s; re-export the model' % (where, error)) from None


def _compact(content):
  text = repr(content)
  return text if len(text) <= 80 else text[:77] + '...'


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """How one clone's batches are made (checked before, by the entry's setup).

  Attributes:
    batch_size: examples per clone batch.
    image_size: image side, or a clip's crop side.
    num_readers: shard files read at once.
    num_parallel_calls: examples decoded and preprocessed in parallel.
    num_shards, shard_index: this worker reads every num_shards-th shard file from
      shard_index (cluster workers read disjoint files).
    labels_offset: subtracted from every label.
    preprocessing_name: images: the registered preprocessing (`image_preprocessing`).
    clip_frames: clips: frames per clip.
    random_flip: clips, training: mirror half of the clips (and negate flow's u).
    repeat_first_frame: clips: every frame replaced by the clip's first (no motion).
    service: a service_client.ServiceSettings: the tf.data service's data workers run
      the pipeline and the clone reads their batches (num_shards 1: the service shards);
      None: the pipeline runs here.
    sampling: clips, evaluation: how each video becomes clips (its clip_frames and
      crop_size are this object's; `for_sampling` builds it so); None: 1 clip.
    modality: clips: 'rgb' or 'flow'; None: the split's.
    shuffle_buffer_size: examples in the shuffle buffer when training; None: the
      builder's (1000 images, 64 videos).
    num_epochs: passes over the data; None: forever when training, once otherwise.
    drop_remainder: drop a last partial batch (a static batch dimension).
    seed: seeds file order, shuffles and random choices (training).
    prefetch_batches: batches prepared ahead of the consumer.
    deferred: clips: uint8 clips (and training's flip bits) for the consumer to finish
      (`clip_decode.finish_clips`) on its own device.
    report_damaged: evaluation: elements carry which examples did not decode instead
      of failing the pipeline.
    with_ids: training: each element ends with the id of every example in the batch
      (string [batch]: images 'record N of <shard>', clips their video id), for a run
      that records which examples each step trained.
  """
  batch_size: int
  image_size: int
  num_readers: int = 4
  num_parallel_calls: int = 4
  num_shards: int = 1
  shard_index: int = 0
  labels_offset: int = 0
  preprocessing_name: Optional[str] = None
  clip_frames: Optional[int] = None
  random_flip: bool = True
  repeat_first_frame: bool = False
  service: Optional[ServiceSettings] = None
  sampling: Optional[Sampling] = None
  modality: Optional[str] = None
  shuffle_buffer_size: Optional[int] = None
  num_epochs: Optional[int] = None
  drop_remainder: bool = True
  seed: Optional[int] = None
  prefetch_batches: int = 2
  deferred: bool = False
  report_damaged: bool = False
  with_ids: bool = False

  def __post_init__(self):
    sampling = self.sampling
    if sampling is not None and (sampling.clip_frames, sampling.crop_size) != (
        self.clip_frames, self.image_size):
      raise ValueError('InputSettings: sampling %s, but clip_frames=%r, image_size=%r; '
                       'build it with InputSettings.for_sampling' % (
                           sampling.describe(), self.clip_frames, self.image_size))

  @classmethod
  def for_sampling(cls, sampling, **fields):
    """Settings that cut each video as `sampling` says (its frames and crop)."""
    return cls(image_size=sampling.crop_size, clip_frames=sampling.clip_frames,
               sampling=sampling, **fields)
