"""Video-level evaluation: every video of a split once, scores per video, metrics.

Each video becomes one clip of its first N frames or K clips spread over it (the video
input's evaluation mode, `datasets.inputs.input_factory`: centre crop, values in [-1,
1]); the network runs with batch norm in inference mode (is_training=False) and its
logits are averaged over a video's clips. The batches, the restore and the progress
lines are `evaluation.loop`'s, shared with image evaluation.
Moving-average weights are restored when the checkpoint holds them (see
`checkpoints.restore`). Two-stream fusion sums the rgb and flow models' per-video logits,
joined by video id.

    setup = check_eval_config(config)
    result = evaluate_videos(setup, checkpoints)   # one checkpoint per stream
    result.metrics['rgb'].top1
"""

import dataclasses

from absl import logging
import numpy as np

from core.params import ConfigError
from evaluation import loop
from evaluation.metrics import classification_metrics
from tf_compat import tf

__all__ = ['StreamScores', 'VideoEvalResult', 'clip_logits', 'score_videos', 'fuse',
           'evaluate_videos']


@dataclasses.dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous.
class StreamScores:
  """Per-video logits of one stream (or of the fusion).

  Attributes:
    name: 'rgb', 'flow' or 'fusion'.
    checkpoint: the checkpoint prefix ('' for the fusion).
    global_step: the checkpoint's step (the rgb stream's for the fusion).
    moving_averages: whether averaged weights were evaluated.
    video_ids: str [N], in the order read: the videos scored.
    labels: int64 [N] (labels_offset subtracted).
    logits: float32 [N, C], averaged over each video's clips (summed over streams for
      the fusion).
    unscored: ((video id, reason), ...) the videos read but not scored: a frame their
      clips need does not decode (the fusion: those of either stream).
    not_read: videos dataset_info.json lists that the records did not hold (a shard's
      index cut at a record boundary); 0 with --max_num_batches, which reads fewer on
      purpose.
  """
  name: str
  checkpoint: str
  global_step: int
  moving_averages: bool
  video_ids: np.ndarray
  labels: np.ndarray
  logits: np.ndarray
  unscored: tuple = ()
  not_read: int = 0

  @property
  def num_unscored(self):
    """Videos of the split this stream could not score (read or not)."""
    return len(self.unscored) + self.not_read

  def probabilities(self):
    """float32 [N, C]: softmax of the logits."""
    shifted = self.logits - self.logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted.astype(np.float64))
    return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class VideoEvalResult:
  """Scores and metrics of every stream; the last stream is the one that counts."""
  streams: tuple        # StreamScores; (rgb,), (flow,) or (rgb, flow, fusion)
  metrics: dict         # stream name -> evaluation.metrics.ClassificationMetrics

  @property
  def primary(self):
    return self.streams[-1]

  @property
  def accuracy(self):
    return self.metrics[self.primary.name].top1

  @property
  def global_step(self):
    return self.primary.global_step


def clip_logits(network_fn, clips):
  """Logits per video: float32 [batch, C].

  Args:
    network_fn: takes [n, T, H, W, C] clips, returns (logits [n, classes], end_points).
    clips: float32 [batch, T, H, W, C] (one clip per video) or [batch, K, T, H, W, C]
      (K clips per video, whose logits are averaged).
  """
  if clips.shape.ndims == 5:
    return network_fn(clips)[0]
  shape = tf.shape(clips)
  flat = tf.reshape(clips, tf.concat([[-1], shape[2:]], 0))
  flat.set_shape([None] + clips.shape.as_list()[2:])
  logits = network_fn(flat)[0]
  per_clip = tf.reshape(logits, tf.stack([shape[0], shape[1], tf.shape(logits)[-1]]))
  return tf.reduce_mean(per_clip, axis=1)


def score_videos(setup, stream, checkpoint):
  """Runs the model of one stream over its split; returns StreamScores.

  Videos whose clips need a frame that does not decode are left out and listed in
  `unscored` with the reason; videos dataset_info.json lists but the records lack are
  counted in `not_read`.

  Raises:
    ConfigError: the checkpoint does not fit the model and records, or the split
      yields no video.
    DataError: a damaged record shard (DamagedShards), or no video could be scored.
  """
  plan, arrays = loop.score_split(setup, stream, checkpoint, clip_logits)
  logits, labels, ids, unscored, not_read = loop.scored(setup, stream, arrays)
  logging.info('%s: %d videos scored with %s (step %d%s)', stream.name, len(ids), checkpoint,
               plan.global_step, ', moving averages' if plan.moving_averages else '')
  return StreamScores(stream.name, checkpoint, plan.global_step, plan.moving_averages,
                      ids, labels, logits.astype(np.float32), unscored, not_read)


def _unscored_by_either(rgb, flow):
  """((video id, 'rgb: reason; flow: reason'), ...) of the videos either stream left out."""
  reasons = {}
  for stream in (rgb, flow):
    for video_id, reason in stream.unscored:
      reasons.setdefault(video_id, []).append('%s: %s' % (stream.name, reason))
  return tuple((video_id, '; '.join(texts)) for video_id, texts in reasons.items())


def _without(stream, video_ids):
  """(ids, labels, logits) of `stream` without the videos in `video_ids`."""
  keep = np.array([v not in video_ids for v in stream.video_ids], bool)
  return stream.video_ids[keep], stream.labels[keep], stream.logits[keep]


def fuse(rgb, flow, flow_flag='flow_dataset_dir'):
  """The fusion stream: rgb + flow logits of the same video, in the rgb order. A video
  either stream could not score is not fused: it is listed in the fusion's `unscored`.

  Raises:
    ConfigError: the two streams did not score the same videos with the same labels.
  """
  unscored = _unscored_by_either(rgb, flow)
  skip = {video_id for video_id, _ in unscored}
  rgb_ids, rgb_labels, rgb_logits = _without(rgb, skip)
  flow_ids, flow_labels, flow_logits = _without(flow, skip)
  position = {video_id: i for i, video_id in enumerate(flow_ids)}
  missing = [v for v in rgb_ids if v not in position]
  extra = len(flow_ids) - (len(rgb_ids) - len(missing))
  if missing or extra or len(position) != len(flow_ids):
    example = missing[0] if missing else 'duplicates or videos the rgb records lack'
    raise ConfigError('--fusion: --%s does not hold the same videos as the rgb records '
                      '(%d rgb videos missing from it, %d extra; e.g. %s)'
                      % (flow_flag, len(missing), max(extra, 0), example))
  order = np.array([position[v] for v in rgb_ids], np.int64)
  if np.any(flow_labels[order] != rgb_labels):
    raise ConfigError('--fusion: --%s labels some videos differently from the rgb records'
                      % flow_flag)
  return StreamScores('fusion', '', rgb.global_step,
                      rgb.moving_averages and flow.moving_averages, rgb_ids, rgb_labels,
                      rgb_logits + flow_logits[order], unscored,
                      max(rgb.not_read, flow.not_read))


def evaluate_videos(setup, checkpoints):
  """Scores every stream of `setup` with its checkpoint; returns a VideoEvalResult.

  Args:
    setup: a checked EvalSetup (kind VIDEO), its config in setup.config.
    checkpoints: one checkpoint prefix per stream of setup.streams.
  """
  streams = [score_videos(setup, stream, checkpoint)
             for stream, checkpoint in zip(setup.streams, checkpoints)]
  if len(streams) == 2:
    streams.append(fuse(*streams))
  metrics = {s.name: classification_metrics(s.logits, s.labels, setup.num_classes)
             for s in streams}
  return VideoEvalResult(tuple(streams), metrics)
