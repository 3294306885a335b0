"""One shard of video records and its index (layout in `datasets/formats/video_records.py`): what
the converter, the record migration and predict write, and what the export reads.

The shard is written first, then its index, each atomically (`shard_writer`); the byte
bounds of the index follow from the record sizes and are checked against the written
file before the index is written.
"""

import typing

from datasets.conversion import shard_writer
from datasets.formats import video_records
from tf_compat import tf

__all__ = ['ChunkedVideo', 'chunk_video', 'write_video_shard', 'read_video_shard']


class ChunkedVideo(typing.NamedTuple):
  """One video's chunk records (serialized, in frame order) and what its index entry
  needs: frame_bounds [n + 1] as `video_records.video_chunks` returns them."""
  video_id: str
  label: int
  chunks: typing.Sequence[bytes]
  frame_bounds: typing.Sequence[int]


def chunk_video(frames, header, chunk_frames):
  """A ChunkedVideo of one video's frames (arguments as video_records.video_chunks:
  header a video_records.VideoHeader)."""
  chunks, bounds = video_records.video_chunks(frames, header, chunk_frames)
  return ChunkedVideo(header.video_id, header.label, chunks, bounds)


def write_video_shard(videos, output_dir, split_name, index, num_shards):
  """Writes the chunk records of `videos` as the shard `<split_name>-<index>-of-<num_shards>`,
  then its index beside it.

  Args:
    videos: iterable of ChunkedVideo, in shard order; consumed once, one video at a time
      (a shard of long videos need not fit in memory).
    output_dir, split_name, index, num_shards: name the shard, as shard_writer.write_shard.

  Returns:
    The shard's path.

  Raises:
    ValueError: bad shard arguments, or a written shard whose size disagrees with the
      index (nothing then keeps the index's final name).
  """
  entries = []
  position = [0]

  def records():
    for video in videos:
      byte_bounds = [position[0]]
      for record in video.chunks:
        position[0] += len(record) + video_records.RECORD_OVERHEAD
        byte_bounds.append(position[0])
        yield record
      entries.append(video_records.index_entry(video.video_id, video.label,
                                               video.frame_bounds, byte_bounds))

  shard = shard_writer.write_shard(records(), output_dir, split_name, index, num_shards,
                                   num_records=None)
  size = tf.io.gfile.stat(shard).length
  if size != position[0]:
    raise ValueError('%s holds %d bytes where its records make %d; the index would not '
                     'address them' % (shard, size, position[0]))
  shard_writer.write_record_file(video_records.index_path(shard), entries, len(entries))
  return shard


def read_video_shard(shard_path):
  """Yields (index entry, [serialized chunk records]) per video of a shard, in order,
  reading the shard once from start to end.

  The entry is a dict: video_id (str), label, frame_bounds, byte_bounds (lists of int).

  Raises:
    ValueError: the shard's records disagree with its index.
  """
  records = tf.compat.v1.io.tf_record_iterator(shard_path)
  for serialized in tf.compat.v1.io.tf_record_iterator(video_records.index_path(shard_path)):
    features = tf.train.Example.FromString(serialized).features.feature
    entry = {'video_id': features['example/id'].bytes_list.value[0].decode('utf-8'),
             'label': features['clip/label/index'].int64_list.value[0],
             'frame_bounds': list(features['chunk/frame_bounds'].int64_list.value),
             'byte_bounds': list(features['chunk/byte_bounds'].int64_list.value)}
    chunks = [next(records, None) for _ in entry['frame_bounds'][1:]]
    sizes = [b - a - video_records.RECORD_OVERHEAD
             for a, b in zip(entry['byte_bounds'][:-1], entry['byte_bounds'][1:])]
    if None in chunks or [len(c) for c in chunks] != sizes:
      raise ValueError('%s does not hold the chunks its index lists for video %s; rebuild '
                       'the shard' % (shard_path, entry['video_id']))
    yield entry, chunks
  if next(records, None) is not None:
    raise ValueError('%s holds records its index does not list; rebuild the shard'
                     % shard_path)
