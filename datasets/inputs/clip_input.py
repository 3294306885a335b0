"""The tf.data input of video classifiers (I3D): clip records -> sampled, cropped clip batches.

Records are the chunked SequenceExamples of `video_records` (one JPEG per frame and channel
group, a few frames per record) with an index per shard. Each video yields frame indices
first, from its index entry; only the chunks holding those frames are read
(`clip_reader.read_frames`), so a clip costs the bytes of its frames whatever the video's
length, and only the JPEGs at those indices are decoded, each distinct frame only once (a
1-frame video looped to 64 frames is one decode), all of a clip's windows in one kernel
(`jpeg_windows`, a custom op: `make jpeg-op`).

    with tf.device('/device:CPU:0'):
      settings = InputSettings(batch_size=6, image_size=224, clip_frames=64)
      dataset = build_clip_dataset(split, settings, is_training=True)
      clips, labels = tf.data.make_one_shot_iterator(dataset).get_next()

Training uses `deferred=True`: the pipeline emits uint8 clips and one flip bit per clip,
and the clone applies them on its own device with `finish_clips` (scale to [-1, 1], flip).
The input CPU then spends its time decoding JPEGs, not on float arithmetic and a 10 MB
mirror copy per clip, and a quarter of the bytes cross to the GPU. The decoding steps and
`finish_clips` are datasets/inputs/clip_decode.py's.

Sampling:
  training     one clip of `clip_frames` consecutive frames from a random start in
               [0, num_frames), indices taken modulo num_frames, so short videos loop.
  eval_frames  one clip of the first N frames (looped if the video is shorter), e.g. the
               whole video up to 250 frames as in I3D testing.
  eval_clips   K clips of `clip_frames` frames, clip k starting at
               floor(k * max(num_frames - clip_frames, 0) / max(K - 1, 1)), so the first
               starts at frame 0 and the last ends at the last frame; all K clips of a video
               stay in one element so their scores can be averaged per video.

Spatial processing is the same for every frame of a video:
  - frames whose short side is below `crop_size` are first resized (bilinear, half-pixel
    centres, aspect kept) so that the short side is `crop_size`; larger frames are used as
    stored (the converter already resized them, e.g. short side 256);
  - training takes one random crop and one random horizontal flip per clip, evaluation the
    centre crop and no flip;
  - frames stay uint8 through decode, crop, flip and the gather that loops them;
  - values are scaled with x / 127.5 - 1 (in the pipeline, or by the consumer):
    rgb 0..255 -> [-1, 1]; flow is stored as round((flow + 20) * 255 / 40), so the same
    formula gives flow / 20 in [-1, 1].
A horizontal flip mirrors the motion too: what moved right now moves left, so the
horizontal flow component u changes sign. In the stored encoding -u is 255 - u; v is only
mirrored. Without this the flipped flow would contradict the flipped pixels.

Randomness: every training element is paired with a key from `tf.data.Dataset.random(seed)`
and its start, crop and flip come from stateless ops keyed on it, so they do not depend on
which parallel map call handles the element. With a seed, file order, record shuffle and
keys are seeded and the pipeline is deterministic, so runs repeat exactly.

Frames that do not decode (a JPEG cut short inside a record; `damaged_frames`): each
chosen frame gets a flag, and zeros. Training drops a clip that needs such a
frame and tells `skips` (a SkipCounter: it logs the video and its shard once and counts;
None: one without a limit). Evaluation fails with an error naming the video and its
shard, or with `report_damaged` appends a damage string [batch] to each element: '' or
which frames of the video did not decode (they are zeros in its clips). Training for the
tf.data service (`service`, the trainer's ServiceSettings) runs no Python: every clip is
kept with its mark, and the trainer drops the damaged ones (damaged_frames.mark_damaged).
"""

from datasets.formats import video_records
from datasets.inputs import clip_reader, damaged_frames, record_files
from datasets.inputs.clip_decode import decode_clip, finish_clips
from datasets.inputs.input_settings import Sampling
from tf_compat import tf

_SHUFFLE_BUFFER = 64   # videos, when InputSettings.shuffle_buffer_size is None

# Second word of the stateless seed of each random choice of a training clip.
_START, _OFFSET_Y, _OFFSET_X, _FLIP = range(4)


def build_clip_dataset(split, settings, *, is_training, skips=None):
  """Builds the dataset of clip batches of one split, sampled as the module docstring says.

  Pipeline: interleaved readers of this shard's indexes (an entry per video) -> repeat ->
  one parallel map (sample, read the chunks of the chosen frames, decode, crop, flip, scale)
  -> batch -> prefetch; training shuffles files and videos. ValueError: a bad setting.

  Args:
    split: a DatasetSplit of clip records.
    settings: an InputSettings (each field as `input_settings` says); for clips:
      batch_size counts videos, clip_frames is training's frames per clip, image_size
      the crop's side, sampling evaluation's (None: 1 clip of clip_frames), modality
      'rgb' (3 channels) or 'flow' (2: u, v) (None: the split's, else 'rgb'),
      shuffle_buffer_size counts videos (None: 64), seed seeds file order, record
      shuffle, starts, crops and flips (without it training is random and tf.data may
      return elements as soon as they are ready), num_shards needs as many files or more,
      random_flip is off when a mirror changes the label, deferred gives uint8 clips
      0..255, unflipped, with each training clip's flip bit (`finish_clips` on the
      consumer's device gives exactly deferred=False's float32 clips), report_damaged and
      service: frames that do not decode (the module docstring).
    is_training: random start, crop and flip, shuffled order; else centre crop, fixed order.
    skips: training: the damaged_frames.SkipCounter told of every clip dropped.

  Returns:
    tf.data.Dataset of
      training:     (clips float32 [batch, clip_frames, crop, crop, C], labels int64 [batch])
      eval_frames:  (clips float32 [batch, N, crop, crop, C], labels, video_ids string [batch])
      eval_clips:   (clips float32 [batch, K, clip_frames, crop, crop, C], labels, video_ids)
    in [-1, 1], batch static when drop_remainder is True. deferred=True: clips are uint8
    and training elements are (clips, labels, flips bool [batch]).
  """
  shuffle_buffer_size, modality, sampling = _checked(split, settings, is_training)
  records = _records(split, is_training, settings, shuffle_buffer_size)
  sample = (_training_sampler(modality, settings) if is_training else
            _eval_sampler(modality, sampling, settings))
  dataset = _mapped(records, sample, settings.num_parallel_calls, is_training, skips,
                    settings.service)
  return record_files.batched(dataset, settings, is_training)


def _checked(split, settings, is_training):
  """-> (shuffle buffer: settings' or 64, modality, evaluation's Sampling or None), once
  every setting the pipeline reads is checked; ValueError names the first bad one."""
  shuffle_buffer_size = settings.shuffle_buffer_size or _SHUFFLE_BUFFER
  record_files.check_positive(
      batch_size=settings.batch_size, clip_frames=settings.clip_frames,
      crop_size=settings.image_size, num_readers=settings.num_readers,
      num_parallel_calls=settings.num_parallel_calls, shuffle_buffer_size=shuffle_buffer_size,
      num_shards=settings.num_shards, prefetch_batches=settings.prefetch_batches)
  modality = _resolve_modality(split, settings.modality)
  sampling = _eval_sampling(is_training, settings)
  record_files.check_arguments(split, settings.num_epochs, settings.num_shards,
                               settings.shard_index, settings.labels_offset)
  return shuffle_buffer_size, modality, sampling


def _mapped(records, sample, num_parallel_calls, is_training, skips, service):
  """records mapped by `sample`; training drops the clips whose frames did not all decode
  (each told to `skips`, or carried on in the elements for the tf.data service)."""
  dataset = records.map(record_files.as_written(sample), num_parallel_calls=num_parallel_calls)
  if not is_training:
    return dataset
  if service is not None:
    return damaged_frames.mark_damaged(dataset)
  return damaged_frames.skip_damaged(dataset, skips or damaged_frames.SkipCounter())


def _records(split, is_training, settings, shuffle_buffer_size):
  """This shard's videos, (shard path, serialized index entry) each, repeated: when
  training num_epochs times (None: forever), each paired with an int64 key of
  `Dataset.random(seed)` for its random choices; when evaluating num_epochs times or once."""
  files = record_files.input_files(split, settings.num_shards, settings.shard_index)
  records = clip_reader.video_entries(files, settings, is_training, shuffle_buffer_size)
  if not is_training:
    return records.repeat(settings.num_epochs or 1)
  return tf.data.Dataset.zip((records.repeat(settings.num_epochs),
                              tf.data.Dataset.random(seed=settings.seed)))


def _resolve_modality(split, modality):
  """The explicit modality, else the split's, else 'rgb'; checked against the split's."""
  split_modality = getattr(split, 'modality', None)
  modality = modality or split_modality or 'rgb'
  if modality not in video_records.MODALITIES:
    raise ValueError('modality=%r is not accepted: use one of %s'
                     % (modality, ', '.join(sorted(video_records.MODALITIES))))
  if split_modality is not None and split_modality != modality:
    raise ValueError('modality=%r is not accepted: %s %s holds %r records'
                     % (modality, split.name, split.split_name, split_modality))
  return modality


def _eval_sampling(is_training, settings):
  """The Sampling evaluation cuts each video by (settings.sampling, else 1 clip); None
  when training, which takes no Sampling."""
  if is_training:
    if settings.sampling is not None:
      raise ValueError('sampling=%s is not accepted when is_training=True: it chooses the '
                       'evaluation sampling; use None' % settings.sampling.describe())
    return None
  return settings.sampling or Sampling(eval_frames=None, eval_clips=1,
                                       clip_frames=settings.clip_frames,
                                       crop_size=settings.image_size)


def _training_sampler(modality, settings):
  """-> map function ((shard, index entry), key int64) -> (clip [T, crop, crop, C],
  label[, flip]) + damaged_frames.EXTRA_ITEMS, for skip_damaged."""
  clip_frames, crop_size, deferred = (settings.clip_frames, settings.image_size,
                                      settings.deferred)

  def sample(record, key):
    shard, serialized = record
    video = video_records.parse_index_entry(serialized)

    def uniform(maxval, purpose):
      """A stateless integer in [0, maxval) for one choice of this element."""
      return tf.random.stateless_uniform([], tf.stack([key, tf.constant(purpose, tf.int64)]),
                                         minval=0, maxval=maxval, dtype=tf.int32)

    num_frames = tf.cast(video['frame_bounds'][-1], tf.int32)
    indices = (uniform(num_frames, _START) + _offsets(clip_frames,
                                                      settings.repeat_first_frame)
               ) % num_frames

    def random_offsets(height, width):
      return (uniform(height - crop_size + 1, _OFFSET_Y),
              uniform(width - crop_size + 1, _OFFSET_X))

    flip = tf.equal(uniform(2, _FLIP), 1) if settings.random_flip else tf.constant(False)
    label = video['label'] - settings.labels_offset
    clip, undecoded = _read_and_decode(shard, video, indices, modality, crop_size,
                                       random_offsets, None if deferred else flip)
    element = (clip, label, flip) if deferred else (finish_clips(clip, modality), label)
    if settings.with_ids:
      element += (video['video_id'],)
    return element + (video['video_id'], shard, undecoded, num_frames)

  return sample


def _eval_sampler(modality, sampling, settings):
  """-> map function (shard, index entry) -> (clips, label, video_id[, damage]), centre
  crop, no flip, as `sampling` (a Sampling) cuts each video."""
  crop_size, clip_frames = sampling.crop_size, sampling.clip_frames
  repeat_first_frame, report_damaged = settings.repeat_first_frame, settings.report_damaged

  def centre_offsets(height, width):
    return (height - crop_size) // 2, (width - crop_size) // 2

  def sample(shard, serialized):
    video = video_records.parse_index_entry(serialized)
    num_frames = tf.cast(video['frame_bounds'][-1], tf.int32)
    if sampling.eval_frames is not None:
      indices = _offsets(sampling.eval_frames, repeat_first_frame) % num_frames   # [N]
    else:
      starts = _uniform_clip_starts(num_frames, clip_frames, sampling.eval_clips)  # [K]
      indices = (starts[:, None] + _offsets(clip_frames, repeat_first_frame)[None, :]
                 ) % num_frames
    clips, undecoded = _read_and_decode(shard, video, indices, modality, crop_size,
                                        centre_offsets)
    damage = damaged_frames.damage_reason(undecoded, num_frames, shard)
    if not report_damaged:
      with tf.control_dependencies([tf.debugging.Assert(
          tf.equal(tf.size(undecoded), 0), ['video', video['video_id'], damage])]):
        clips = tf.identity(clips)
    if not settings.deferred:
      clips = finish_clips(clips, modality)
    element = (clips, video['label'] - settings.labels_offset, video['video_id'])
    return element + (damage,) if report_damaged else element

  return sample


def _offsets(length, repeat_first_frame):
  """int32 [length]: frame offsets from a clip's start, 0..length-1 (all 0 to repeat)."""
  return tf.zeros([length], tf.int32) if repeat_first_frame else tf.range(length)


def _uniform_clip_starts(num_frames, clip_frames, num_clips):
  """int32 [num_clips]: floor(k * max(num_frames - clip_frames, 0) / max(num_clips - 1, 1))."""
  span = tf.maximum(num_frames - clip_frames, 0)
  return tf.range(num_clips) * span // max(num_clips - 1, 1)


def _read_and_decode(shard, video, indices, modality, crop_size, offsets_fn, flip=None):
  """decode_clip of the frames at `indices` (frame numbers of the video), read from the
  chunks holding them (`clip_reader.read_frames`); the frames that did not decode are
  given as frame numbers of the video, int32 [n] sorted, as the log and reports name them.
  """
  frames, local = clip_reader.read_frames(shard, video, indices, modality)
  clip, undecoded_local = decode_clip(frames, local, modality, crop_size, offsets_fn, flip)
  # read_frames renumbers frames into the chunks read; map the failures back.
  flat_local = tf.reshape(local, [-1])
  frame_of_local = tf.math.unsorted_segment_max(
      tf.reshape(indices, [-1]), flat_local, tf.shape(frames)[0])
  return clip, tf.sort(tf.gather(frame_of_local, undecoded_local))
