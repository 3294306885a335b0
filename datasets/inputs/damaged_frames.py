"""Frames that do not decode: found frame by frame, the video named, its clip skipped or
reported, never the whole input pipeline ended.

One JPEG that does not decode (a frame cut short or overwritten inside a record whose CRC
is fine) makes `tf.io.decode_jpeg` fail, and one failing op ends a tf.data pipeline, so a
whole training run. `Dataset.ignore_errors()` would drop that element, but nothing would
then say which video it was. Here the chosen frames are decoded in one loop inside a
one-element dataset with errors ignored, and, only when that fails, each as an element of
a small dataset of its own: the clip comes back with a flag per frame, in the same map
call that still holds the video's id and shard file.

  map_checked, decode_or_blank   (in `datasets/formats/checked_decode.py`, which the
                                 verifier shares) decode past the frames that fail
  skip_damaged(dataset, skips)   training: drops the clips whose frames did not all
                                 decode, each reported to `skips` (a SkipCounter)
  mark_damaged(dataset)          the same for a pipeline the tf.data service runs (no
                                 Python in it): every clip is kept with its mark (a
                                 report line or '', and whether it decoded); when the
                                 batches reach the trainer, drop_marked(skips) tells
                                 `skips` and removes the damaged clips
  damage_reason(...)             evaluation: '' for a clip that decoded, else one line
                                 saying which frames did not, and in which shard

`SkipCounter` is the Python side of one input pipeline: it logs each damaged video once
(id, shard, frames), counts skipped clips and distinct damaged videos, and says when the
damaged videos pass its limit; the trainer reads it at every step (training/progress.py).
A cut frame also makes libjpeg log its own "Premature end of JPEG data" line (TensorFlow's
C++ log, not ours), without the video's name.
"""

import threading

import numpy as np
from absl import logging

from datasets.inputs.record_files import as_written
from tf_compat import tf

__all__ = ['skip_damaged', 'mark_damaged', 'drop_marked', 'damage_reason',
           'SkipCounter', 'EXTRA_ITEMS']

# Items a training map function appends to its element for skip_damaged:
# video id (string), shard file (string), undecoded frame indices (int32 [n]),
# frames in the video (int32).
EXTRA_ITEMS = 4


def skip_damaged(dataset, skips):
  """Training: drops each element whose frames did not all decode, reporting it to `skips`.

  Args:
    dataset: elements (..., video_id, shard file, undecoded int32 [n], num_frames): a
      training map function's output with the EXTRA_ITEMS appended.
    skips: a SkipCounter.

  Returns:
    The dataset of the elements that decoded, without the EXTRA_ITEMS.
  """

  def decoded(*element):
    video_id, file_name, undecoded, num_frames = element[-EXTRA_ITEMS:]
    report = lambda: tf.reshape(tf.numpy_function(
        skips.record, [video_id, file_name, undecoded, num_frames], tf.bool,
        stateful=True), [])
    return tf.cond(tf.equal(tf.size(undecoded), 0), lambda: tf.constant(True), report)

  return dataset.filter(as_written(decoded)).map(
      as_written(lambda *element: element[:-EXTRA_ITEMS]))


def _report_line(video_id, file_name, undecoded, num_frames):
  """'video_id\tshard\t3,4\t14\n': one dropped clip, as SkipCounter.record_carried reads it."""
  frames = tf.strings.reduce_join(tf.strings.as_string(undecoded), separator=',')
  return tf.strings.join([video_id, file_name, frames, tf.strings.as_string(num_frames)],
                         separator='\t') + '\n'


def mark_damaged(dataset):
  """skip_damaged for a pipeline the tf.data service runs (no Python there): keeps every
  element and marks it, so the trainer drops the damaged ones and reports them.

  A mark travels with its own clip, so no report is lost at the end of a data worker's
  share of an epoch (an earlier form carried the reports on the next clip kept, and a
  damaged last clip had none).

  Args:
    dataset: elements (..., video_id, shard file, undecoded int32 [n], num_frames), as for
      skip_damaged.

  Returns:
    The dataset of every element, each (..., report string [], decoded bool []): report ''
    or the clip's line (SkipCounter.record_carried reads it); batched by the workers.
  """

  def mark(*element):
    video_id, file_name, undecoded, num_frames = element[-EXTRA_ITEMS:]
    damaged = tf.size(undecoded) > 0
    report = tf.where(damaged, _report_line(video_id, file_name, undecoded, num_frames), '')
    return element[:-EXTRA_ITEMS] + (report, tf.logical_not(damaged))

  return dataset.map(as_written(mark))


def drop_marked(skips):
  """On the trainer: fn(batches (..., reports string [b], decoded bool [b]) of
  mark_damaged) -> the same batches without the damaged clips and the two marks, each
  damaged clip told to `skips` (a SkipCounter) as its batch is drawn. A batch with no
  damaged clip is passed on without a copy."""

  def told(*batch):
    *items, reports, decoded = batch
    record = tf.numpy_function(skips.record_carried, [reports], tf.int64, stateful=True)
    with tf.control_dependencies([record]):
      return tf.cond(tf.reduce_all(decoded),
                     lambda: tuple(tf.identity(item) for item in items),
                     lambda: tuple(tf.boolean_mask(item, decoded) for item in items))

  return lambda dataset: dataset.map(as_written(told))


def damage_reason(undecoded, num_frames, file_name):
  """Evaluation: string scalar, '' when `undecoded` (int32 [n]) is empty, else e.g.
  'frames 3, 4 of 14 do not decode (shard /data/x/test-00000-of-00002)'."""
  def reason():
    listed = tf.strings.reduce_join(tf.strings.as_string(undecoded), separator=', ')
    plural = tf.where(tf.size(undecoded) > 1, 'frames ', 'frame ')
    verb = tf.where(tf.size(undecoded) > 1, ' do not decode (shard ', ' does not decode (shard ')
    return tf.strings.join([plural, listed, ' of ', tf.strings.as_string(num_frames), verb,
                            file_name, ')'])
  return tf.cond(tf.size(undecoded) > 0, reason, lambda: tf.constant(''))


def _text(value):
  return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)


class SkipCounter:
  """What one input pipeline skipped: clips, and the distinct videos they came from.

  `record` is called from the pipeline's threads (through tf.numpy_function); the
  trainer reads the counts and `exceeded` between steps.

  Args:
    limit: damaged videos allowed; `exceeded` once there are more. None: no limit.
  """

  def __init__(self, limit=None):
    self.limit = limit
    self._lock = threading.Lock()
    self._clips = 0
    self._videos = {}   # video id -> (shard file, undecoded frame indices, frames)

  def record(self, video_id, file_name, undecoded, num_frames):
    """Counts one skipped clip; logs its video the first time. Returns False (drop it)."""
    video_id, file_name = _text(video_id), _text(file_name)
    frames = [int(i) for i in undecoded]
    with self._lock:
      self._clips += 1
      first = video_id not in self._videos
      if first:
        self._videos[video_id] = (file_name, frames, int(num_frames))
    if first:
      logging.warning(
          'Skipping a clip of video %s (shard %s): %s %s of its %d do%s not decode; its '
          'clips are skipped whenever they need %s (this video is named once; python -m '
          'datasets.verify_records lists every damaged frame)', video_id, file_name,
          'frame' if len(frames) == 1 else 'frames', ', '.join(map(str, frames)),
          int(num_frames), 'es' if len(frames) == 1 else '',
          'it' if len(frames) == 1 else 'them')
    return False

  def record_carried(self, reports):
    """Records every clip in `reports` (bytes [batch] of mark_damaged's lines, most ''):
    -> int64, the clips recorded."""
    count = 0
    for report in reports:
      for line in _text(report).splitlines():
        video_id, file_name, frames, num_frames = line.split('\t')
        self.record(video_id, file_name, [int(f) for f in frames.split(',')],
                    int(num_frames))
        count += 1
    return np.int64(count)

  @property
  def skipped_clips(self):
    with self._lock:
      return self._clips

  @property
  def damaged_videos(self):
    with self._lock:
      return len(self._videos)

  def damaged(self):
    """{video id: (shard file, undecoded frame indices, frames in the video)}."""
    with self._lock:
      return dict(self._videos)

  @property
  def exceeded(self):
    return self.limit is not None and self.damaged_videos > self.limit
