"""A clip's frames from JPEG to the values a network takes: each distinct frame decoded once
and cut to one window (`decode_and_crop_frames`: one kernel, `jpeg_windows`, for the common
case), the uint8 clip with its frames that did not decode (`decode_clip`, the clip map
function's step), and on the consumer's device the scale to [-1, 1] and the flips
(`finish_clips`). Everything before `finish_clips` stays uint8: a quarter of float32's bytes.
datasets/inputs/clip_input.py samples the frames; `python -m benchmarks.input_pipeline
--breakdown` times these steps as the library runs them.
"""

from datasets.formats import checked_decode, video_records
from datasets.inputs import jpeg_windows
from tf_compat import tf

__all__ = ['decode_clip', 'decode_and_crop_frames', 'finish_clips']


def decode_clip(frames, indices, modality, crop_size, offsets_fn, flip=None):
  """The uint8 clip(s) of a video's frames at `indices`: each distinct frame decoded once,
  all cropped to one window, optionally mirrored (the training map function's clip step),
  and the indices of the frames that did not decode (damaged_frames).

  Everything stays uint8: decode, crop, flip and the gather that repeats frames for looped
  clips move a quarter of the bytes float32 would.

  Args:
    frames: the JPEGs read, string [F] (rgb) or [F, 2] (flow), as
      `clip_reader.read_frames` returns them.
    indices: int32 frame indices of any static shape, e.g. [T] or [K, T]; repeated indices
      are decoded once.
    modality: 'rgb' (C = 3) or 'flow' (C = 2).
    crop_size: height and width of the window.
    offsets_fn: (height, width) of the (resized) frames -> crop offsets (y, x), shared by
      every frame.
    flip: bool scalar tensor flipping every frame, or None for no flip.

  Returns:
    (uint8 indices.shape + [crop_size, crop_size, C], the stored values 0..255, zeros for
     a frame that does not decode; int32 [n] the frame indices that did not, sorted).
  """
  flat = tf.reshape(indices, [-1])
  unique, positions = tf.unique(flat)
  images, decoded = decode_and_crop_frames(tf.gather(frames, unique), modality, crop_size,
                                           offsets_fn)
  undecoded = tf.sort(tf.boolean_mask(unique, tf.logical_not(decoded)))
  if flip is not None:
    images = tf.cond(flip, lambda: _flip_left_right(images, modality), lambda: images)
  # Looped clips repeat frames; a clip of distinct frames in order needs no copy.
  images = tf.cond(tf.size(unique) < tf.size(flat), lambda: tf.gather(images, positions),
                   lambda: images)
  channels = video_records.MODALITIES[modality]
  return (tf.reshape(images, indices.shape.as_list() + [crop_size, crop_size, channels]),
          undecoded)


def finish_clips(clips, modality='rgb', flips=None):
  """uint8 clips 0..255 -> float32 clips in [-1, 1], each flipped where `flips` says.

  x / 127.5 - 1 maps rgb 0..255 to [-1, 1] and flow stored as round((flow + 20) * 255 / 40)
  to flow / 20. A flipped clip is mirrored along its width and, for flow, u is negated:
  the same values as flipping the stored frames (-u is 255 - u stored) and then scaling.

  Args:
    clips: uint8 [..., height, width, C]; with flips, [batch, ..., height, width, C].
    modality: 'rgb' or 'flow'.
    flips: None, or bool [batch]: flip clip b when flips[b].

  Returns:
    float32, the shape of `clips`.
  """
  if flips is not None:
    clips = _flip_where(clips, flips, modality)
  return tf.cast(clips, tf.float32) / 127.5 - 1.0


def _flip_where(clips, flips, modality):
  """uint8 [batch, ..., H, W, C]: clip b mirrored (and flow u -> 255 - u) where flips[b].

  Mirroring the uint8 values before the float conversion moves a quarter of the bytes, and
  the 4-D view [batch, -1, W, C] lets TensorFlow's reverse kernel copy whole pixels.
  """
  shape = tf.shape(clips)
  view = tf.reshape(clips, tf.stack([shape[0], -1, shape[-2], shape[-1]]))
  mirrored = tf.reverse(view, axis=[2])
  if modality == 'flow':
    mirrored = tf.concat([255 - mirrored[..., :1], mirrored[..., 1:]], axis=-1)
  chosen = tf.where(tf.broadcast_to(tf.reshape(flips, [-1, 1, 1, 1]), tf.shape(view)),
                    mirrored, view)
  result = tf.reshape(chosen, shape)
  result.set_shape(clips.shape)  # the static shape, e.g. for the network's layers
  return result


def _decoder(modality):
  """-> fn(one frame's JPEG: string [] rgb, [2] flow u, v) -> uint8 [H, W, C], TensorFlow's
  decode for the frames `jpeg_windows` leaves to it (see decode_and_crop_frames).

  The accurate integer DCT gives the pixels of libjpeg's default (Pillow, OpenCV), which
  the published I3D loaders used; TensorFlow's default fast DCT is up to 4 levels off and
  was no faster here.
  """
  def grey_or_rgb(jpeg, channels):
    return tf.io.decode_jpeg(jpeg, channels=channels, dct_method='INTEGER_ACCURATE')

  if modality == 'rgb':
    return lambda jpeg: grey_or_rgb(jpeg, 3)
  return lambda pair: tf.concat([grey_or_rgb(pair[0], 1), grey_or_rgb(pair[1], 1)], axis=-1)


def decode_and_crop_frames(jpegs, modality, size, offsets_fn):
  """Decodes JPEG frames and cuts one window from each: string [U] (rgb) or [U, 2] (flow)
  -> (uint8 [U, size, size, C], the window at offsets_fn(height, width) -> (y, x) of each
  frame; bool [U], whether the frame decoded: a frame that does not is zeros).

  The common case, every frame the first one's size with a short side of at least `size`,
  is one kernel (`jpeg_windows.decode_windows`): each window decoded straight into the
  output, the pixels and failures of tf.io.decode_jpeg's. Any other clip (a frame of
  another size, one to resize, bytes that are not a JPEG) takes TensorFlow's ops, as
  before the op (docs/benchmarks.md, issue 23): frame by frame, each cut to its window
  right after its decode, a frame whose short side is below `size` first resized
  (`_crop`), a frame that does not decode costing only itself
  (`checked_decode.map_checked`).
  """
  channels = video_records.MODALITIES[modality]
  frame_shape = jpeg_windows.header_shape(tf.reshape(jpegs, [-1])[0])
  height, width = frame_shape[0], frame_shape[1]

  def in_one_kernel():
    offsets = tf.stack(offsets_fn(height, width))
    return jpeg_windows.decode_windows(jpegs, frame_shape, offsets, size)

  def elsewhere():
    count = tf.shape(jpegs)[0]
    return (tf.zeros(tf.stack([count, size, size, channels]), tf.uint8),
            tf.fill([count], jpeg_windows.ELSEWHERE))

  windows, status = tf.cond(tf.minimum(height, width) >= size, in_one_kernel, elsewhere)
  decode = _decoder(modality)
  return tf.cond(
      tf.reduce_any(tf.equal(status, jpeg_windows.ELSEWHERE)),
      lambda: checked_decode.map_checked(
          jpegs, lambda jpeg: _crop(decode(jpeg)[None], size, offsets_fn)[0],
          [size, size, channels], tf.uint8),
      lambda: (windows, tf.equal(status, jpeg_windows.DECODED)))


def _crop(images, size, offsets_fn):
  """uint8 [U, H, W, C] -> uint8 [U, size, size, C], one window for every frame (the
  decode step passes one frame at a time, U = 1).

  Frames whose short side is below `size` are first resized (bilinear, aspect kept, rounded
  back to uint8) so that the short side is `size`.
  """
  shape = tf.shape(images)
  height, width = shape[1], shape[2]
  short = tf.minimum(height, width)

  def window(frames, frames_height, frames_width):
    y, x = offsets_fn(frames_height, frames_width)
    return frames[:, y:y + size, x:x + size, :]

  def resize_then_crop():
    # Integer rounding keeps the short side exactly `size`.
    new_height = (height * size + short // 2) // short
    new_width = (width * size + short // 2) // short
    resized = tf.compat.v2.image.resize(images, tf.stack([new_height, new_width]),
                                        method='bilinear')
    resized = tf.cast(tf.round(tf.clip_by_value(resized, 0.0, 255.0)), tf.uint8)
    return window(resized, new_height, new_width)

  return tf.cond(short < size, resize_then_crop, lambda: window(images, height, width))


def _flip_left_right(images, modality):
  """Mirrors uint8 [N, H, W, C] frames; flow u becomes -u, i.e. 255 - u stored.

  Reversing the width axis of the 3-D view [N * H, W, C] gives the same bytes as reversing
  axis 2 of the 4-D tensor, and TensorFlow's reverse kernel is several times faster on it.
  """
  shape = tf.shape(images)
  flipped = tf.reverse(tf.reshape(images, [-1, shape[2], shape[3]]), axis=[1])
  images = tf.reshape(flipped, shape)
  if modality == 'flow':
    images = tf.concat([255 - images[..., :1], images[..., 1:]], axis=-1)
  return images
