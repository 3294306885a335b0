"""Reading only the frames a clip uses: the video records' index in, the chosen chunks out.

`video_entries` is the dataset of one element per video: (shard path, serialized index
entry), read from the shards' `.index` files in the order the records have in the shards
(interleaved, shuffled when training, as `record_files.read_records` reads records).
`read_frames` runs inside the map function: given a video's index entry and the frame
indices a clip samples, it reads the byte ranges of the chunks holding those frames, and
only those, and returns their JPEGs with the indices renumbered into them:

    video = video_records.parse_index_entry(serialized)
    indices = (start + tf.range(64)) % video['frame_bounds'][-1]
    frames, local = read_frames(shard, video, indices, 'rgb')
    clip = clip_decode.decode_clip(frames, local, 'rgb', 224, offsets_fn)

Reads: the chosen chunks form runs of consecutive chunks (a training clip that wraps
around the end of its video makes two); each run is one read of exactly its bytes, by
TensorFlow's TFRecord reader started at the run's byte offset (the `byte_offsets` of
`TFRecordDatasetV2`, which seeks) with a buffer the size of the run, so no byte outside
the run is requested. Every record's CRCs are checked as in any TFRecord read, and each
chunk is checked to be the one the index names (video id and first frame). A read that
fails, or reads other chunks, fails an assertion whose message
(`damaged_shards.read_failure`) names the shard, the bytes and the video (TensorFlow's
"truncated record" names neither); `damaged_shards.shard_error` turns it into one line
with the command that rebuilds the shard.
"""

from datasets.formats import damaged_shards, shards, video_records
from datasets.inputs import record_files
from tf_compat import tf

__all__ = ['video_entries', 'read_frames', 'chunk_runs']


def _index_records(shard):
  """(shard, serialized index entry) for each video of one shard."""
  index = tf.data.TFRecordDataset(tf.strings.join([shard, shards.INDEX_SUFFIX]))
  return index.map(lambda entry: (shard, entry))


def video_entries(files, settings, is_training, shuffle_buffer_size):
  """(shard path, serialized index entry) per video of the shard `files`, read as
  record_files.read_records reads records (`settings` an InputSettings)."""
  return record_files.read_records(files, settings, is_training, shuffle_buffer_size,
                                   reader=_index_records)


def chunk_runs(frame_bounds, flat_indices):
  """Which chunks hold the frames `flat_indices` (int32 [m]), as runs of consecutive ones.

  Returns:
    (needed int64 [k]: the chunks, sorted, each once; chunk_of int64 [m]: the chunk of each
     index; run_first, run_count int64 [r]: each run's first chunk and length).
  """
  num_chunks = tf.size(frame_bounds, out_type=tf.int64) - 1
  chunk_of = tf.searchsorted(frame_bounds[1:], tf.cast(flat_indices, tf.int64), side='right',
                             out_type=tf.int64)
  used = tf.math.unsorted_segment_max(tf.ones_like(chunk_of), chunk_of, num_chunks) > 0
  needed = tf.where(used)[:, 0]
  starts = tf.concat([[True], tf.not_equal(needed[1:], needed[:-1] + 1)], axis=0)
  ends = tf.concat([starts[1:], [True]], axis=0)
  run_first = tf.boolean_mask(needed, starts)
  run_count = tf.boolean_mask(needed, ends) - run_first + 1
  return needed, chunk_of, run_first, run_count


def _read_runs(shard, video, run_first, run_count, total):
  """string [total]: the serialized records of every run, in order, each run one read.

  A read that fails (a shard missing, cut short or corrupt: TensorFlow's own errors name
  no file) yields fewer records, and the check names the shard, the bytes and the video
  instead.
  """
  byte_bounds = video['byte_bounds']
  run_offset = tf.gather(byte_bounds, run_first)
  run_bytes = tf.gather(byte_bounds, run_first + run_count) - run_offset

  def read_run(offset, size, count):
    variant = tf.raw_ops.TFRecordDatasetV2(
        filenames=tf.reshape(shard, [1]), compression_type='', buffer_size=size,
        byte_offsets=tf.reshape(offset, [1]))
    records = tf.data.experimental.from_variant(variant, tf.TensorSpec([], tf.string))
    return records.take(count).ignore_errors()

  runs = tf.data.Dataset.from_tensor_slices((run_offset, run_bytes, run_count))
  nothing = tf.data.Dataset.from_tensors(tf.zeros([0], tf.string))
  records = runs.flat_map(read_run).batch(total).concatenate(nothing).take(1)
  serialized = tf.data.experimental.get_single_element(records)
  complete = tf.debugging.Assert(
      tf.equal(tf.size(serialized, out_type=tf.int64), total),
      [damaged_shards.read_failure('unread', shard, tf.reduce_min(run_offset),
                                   tf.reduce_max(run_offset + run_bytes), video['video_id'])])
  with tf.control_dependencies([complete]):
    return tf.identity(serialized)


def read_frames(shard, video, indices, modality):
  """Reads the chunks holding the frames at `indices` of one video.

  Args:
    shard: string [], the shard's path.
    video: the video's index entry, as `video_records.parse_index_entry` returns it.
    indices: int32 frame indices in [0, num_frames), any static shape ([T], [K, T]).
    modality: 'rgb' or 'flow'.

  Returns:
    (frames: the JPEGs of the chunks read, string [F] (rgb) or [F, 2] (flow);
     local: int32 of the shape of `indices`, each index renumbered into `frames`).
  """
  flat = tf.reshape(indices, [-1])
  frame_bounds = video['frame_bounds']
  needed, chunk_of, run_first, run_count = chunk_runs(frame_bounds, flat)
  serialized = _read_runs(shard, video, run_first, run_count,
                          tf.size(needed, out_type=tf.int64))
  context, frames, lengths = video_records.parse_chunks(serialized, modality)
  expected_first = tf.gather(frame_bounds, needed)
  check = tf.debugging.Assert(
      tf.reduce_all(tf.equal(context['example/id'], video['video_id']))
      & tf.reduce_all(tf.equal(context['chunk/first_frame'], expected_first))
      & tf.reduce_all(tf.equal(lengths, tf.gather(frame_bounds, needed + 1) - expected_first)),
      [damaged_shards.read_failure(
          'unindexed', shard, tf.gather(video['byte_bounds'], needed[0]),
          tf.gather(video['byte_bounds'], needed[-1] + 1), video['video_id'])])
  with tf.control_dependencies([check]):
    frames = tf.identity(frames)
  row_starts = tf.cumsum(lengths, exclusive=True)
  position = tf.searchsorted(needed, chunk_of, out_type=tf.int64)
  local = tf.gather(row_starts, position) + tf.cast(flat, tf.int64) - tf.gather(frame_bounds,
                                                                               chunk_of)
  shape = indices.shape if indices.shape.is_fully_defined() else tf.shape(indices)
  return frames, tf.reshape(tf.cast(local, tf.int32), shape)
