"""The input registry: one input per kind of data (image or video), for training,
evaluation and serving alike, never a branch.

    pipeline = input_factory.get_input(split.kind)        # 'image' or 'video'
    dataset = pipeline.dataset(split, settings)           # on the inputs device
    inputs, labels = pipeline.finish(iterator.get_next(), split)   # on the clone's device
    dataset = pipeline.eval_dataset(split, settings)      # evaluation, serving

An input has four training steps, an evaluation mode and a counter of what it skips, so
neither the trainer nor evaluation needs an `if video` anywhere:
  dataset   the tf.data pipeline of one clone's batches, built on the worker's input device
            (CPU): what it yields is the input's own business (images and labels; or uint8
            clips, labels and a flip bit per clip); `skips`, a damaged_frames.SkipCounter,
            hears of every example skipped because it does not decode (clips: a frame);
            with `settings.service` the pipeline runs on the tf.data service's data
            workers (service_client) and only what reads it is built here;
  finish    what runs on the clone's device, once per batch drawn: images pass through;
            clips are cast, scaled to [-1, 1] and mirrored there (`clip_decode.finish_clips`),
            so the input CPU only decodes. Returns (float32 inputs, int labels);
  summarize what the model sees, as TensorBoard images (a few per summary): the first
            images of the batch; for clips, frame montages (8 frames of each of the first
            clips side by side, flow shown as u, v and a grey third channel) under the
            clip's class (`label_strip`);
  describe  one line for the start-up log;
  eval_dataset  evaluation's and serving's pipeline (`evaluation.loop`, `serving`): every
            example once, in order, centre-cropped (clips: as settings.sampling cuts each
            video), float32 in [-1, 1]; elements (inputs, labels, ids, damage): ids name
            each example ('record N of <shard>', a video id), damage is '' or why it could
            not be used (it does not decode: it is then zeros, and left out of the scores);
  unit      what one example is called in progress lines and messages: 'images', 'videos';
  skip_counter(limit)  the damaged_frames.SkipCounter `dataset` reports skipped examples
            to (clips with a frame that does not decode), or None when the input skips
            nothing (images).
Every batch a clone draws passes through `finish`, so whatever is added per batch (staging,
summaries of what the model sees, several micro-batches per update) is added there once for
both modalities.
"""

import dataclasses

from datasets.formats import dataset_split
from datasets.inputs import (clip_decode, clip_input, damaged_frames, image_input,
                             label_strip, service_client)
from datasets.inputs.input_settings import InputSettings
from tf_compat import tf

__all__ = ['IMAGE', 'VIDEO', 'InputSettings', 'register_input', 'get_input', 'list_inputs',
           'clip_montage']

IMAGE, VIDEO = dataset_split.IMAGE, dataset_split.VIDEO
MAX_SUMMARY_EXAMPLES = 2   # images or clips shown per summary
MONTAGE_FRAMES = 8         # frames of a clip shown side by side


class ImageInput:
  """Images: records -> registered preprocessing -> batches; nothing left for the clone."""

  kind = IMAGE
  unit = 'images'

  def skip_counter(self, limit):  # pylint: disable=unused-argument
    """None: images are not skipped (an image that does not decode ends training)."""
    return None

  def dataset(self, split, settings, skips=None):  # pylint: disable=unused-argument
    build = lambda built: image_input.build_image_dataset(split, built, is_training=True)
    if settings.service is None:
      return build(settings)
    return service_client.distribute_epochs(build, settings)

  def eval_dataset(self, split, settings):
    """(images, labels, 'record N of <shard>', damage) batches, each image once."""
    return image_input.build_image_dataset(
        split, dataclasses.replace(settings, report_damaged=True), is_training=False)

  def finish(self, batch, split):  # pylint: disable=unused-argument
    images, labels = batch
    return images, labels

  def summarize(self, images, labels, split, settings):  # pylint: disable=unused-argument
    """'input/images': the first MAX_SUMMARY_EXAMPLES images after preprocessing."""
    tf.summary.image('input/images', images, max_outputs=MAX_SUMMARY_EXAMPLES)

  def describe(self, settings, split):  # pylint: disable=unused-argument
    return '%dx%d images (%s preprocessing)' % (settings.image_size, settings.image_size,
                                                settings.preprocessing_name)


class ClipInput:
  """Video clips: uint8 crops and a flip bit per clip; the clone scales and mirrors them."""

  kind = VIDEO
  unit = 'videos'

  def skip_counter(self, limit):
    """A clip with a frame that does not decode is skipped and counted here (at most
    `limit` damaged videos: `exceeded` beyond)."""
    return damaged_frames.SkipCounter(limit)

  def dataset(self, split, settings, skips=None):
    # The clone finishes the clips (`finish`): the input CPU only decodes.
    build = lambda built: clip_input.build_clip_dataset(
        split, dataclasses.replace(built, deferred=True), is_training=True, skips=skips)
    if settings.service is None:
      return build(settings)
    # The data workers mark the damaged clips; the trainer drops them, its counter told.
    return service_client.distribute_epochs(build, settings, received=damaged_frames.drop_marked(
        skips or damaged_frames.SkipCounter()))

  def eval_dataset(self, split, settings):
    """(clips [batch, N, ...] or [batch, K, T, ...], labels, video ids, damage) batches,
    each video once, cut as settings.sampling says."""
    return clip_input.build_clip_dataset(
        split, dataclasses.replace(settings, report_damaged=True), is_training=False)

  def finish(self, batch, split):
    clips, labels, flips = batch
    return clip_decode.finish_clips(clips, split.modality, flips), labels

  def summarize(self, clips, labels, split, settings):
    """'input/clips': a montage per clip of the first MAX_SUMMARY_EXAMPLES, each under its
    class ('3: ApplyEyeMakeup'; labels after settings.labels_offset, named by labels.txt)."""
    texts = label_strip.label_texts(split.labels_to_names,
                                    split.num_classes - settings.labels_offset,
                                    settings.labels_offset)
    montages = clip_montage(clips[:MAX_SUMMARY_EXAMPLES])
    tf.summary.image('input/clips', label_strip.with_labels(
        montages, labels[:MAX_SUMMARY_EXAMPLES], texts), max_outputs=MAX_SUMMARY_EXAMPLES)

  def describe(self, settings, split):
    return '%dx%dx%d %s clips%s' % (
        settings.clip_frames, settings.image_size, settings.image_size, split.modality,
        ' (first frame repeated: no motion)' if settings.repeat_first_frame else '')


def clip_montage(clips, frames=MONTAGE_FRAMES):
  """Clips [B, T, H, W, C] in [-1, 1] -> uint8 [B, H, n * W, 3]: n frames spread evenly
  over T (n = min(frames, T)) side by side; 2-channel flow gets a mid-grey third channel."""
  length = tf.shape(clips)[1]
  count = tf.minimum(frames, length)
  picks = tf.cast(tf.round(tf.linspace(0.0, tf.cast(length - 1, tf.float32), count)),
                  tf.int32)
  chosen = tf.gather(clips, picks, axis=1)                          # [B, n, H, W, C]
  if clips.shape[-1] == 2:
    chosen = tf.concat([chosen, tf.zeros_like(chosen[..., :1])], axis=-1)
  shape = tf.shape(chosen)
  montage = tf.reshape(tf.transpose(chosen, [0, 2, 1, 3, 4]),
                       [shape[0], shape[2], shape[1] * shape[3], 3])
  return tf.cast(tf.round((tf.clip_by_value(montage, -1.0, 1.0) + 1.0) * 127.5), tf.uint8)


_REGISTRY = {}


def register_input(pipeline):
  """Adds the input of `pipeline.kind`; a kind registered twice raises ValueError."""
  if pipeline.kind in _REGISTRY:
    raise ValueError('an input for %r is already registered' % pipeline.kind)
  _REGISTRY[pipeline.kind] = pipeline


def list_inputs():
  """The kinds of data (IMAGE, VIDEO) that have an input, sorted."""
  return sorted(_REGISTRY)


def get_input(kind):
  """The input of `kind` (a split's `kind`); an unknown one raises ValueError listing the
  valid ones."""
  if kind not in _REGISTRY:
    raise ValueError('no input for %r; valid: %s' % (kind, ', '.join(list_inputs())))
  return _REGISTRY[kind]


register_input(ImageInput())
register_input(ClipInput())
