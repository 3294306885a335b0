"""The library's clip pipeline as training reads it: clips/s of `build_clip_dataset`, and
the single-core cost of each step of its training map function (`--breakdown`)."""

import json
import statistics

from benchmarks.input_pipeline import baselines, tf_module
from training.doctor import rounds


def clip_pipeline(data, settings, consumer=None):
  """clips/s of build_clip_dataset(is_training=True), the way training reads it.

  consumer=None: deferred=True, as training uses it; the batch of uint8 clips and flip
  bits is fetched, and the clone's `finish_clips` (scale and flip, on the GPU in a GPU
  run) is not counted. consumer='cpu': the same plus `finish_clips` on this CPU, all of
  the batch summed, as in a CPU-only run. consumer='float': deferred=False, the pipeline
  itself scales and flips.
  """
  tf = tf_module()
  graph, fetch = training_graph(data['records_dir'], settings, consumer)
  return baselines.session_rate(tf, graph, fetch, settings)


def training_graph(records_dir, settings, consumer=None):
  """(graph, fetch): one training batch of the train split in `records_dir` per run of
  `fetch`, on /device:CPU:0; `consumer` as in clip_pipeline."""
  tf = tf_module()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.inputs import clip_decode, clip_input  # pylint: disable=import-outside-toplevel
  from datasets.inputs.input_settings import (  # pylint: disable=import-outside-toplevel
      InputSettings)
  split = dataset_factory.get_dataset('video_folder', 'train', records_dir)
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    dataset = clip_input.build_clip_dataset(split, InputSettings(
        batch_size=settings.batch_size, clip_frames=settings.clip_frames,
        image_size=settings.crop_size, num_readers=settings.num_readers,
        num_parallel_calls=settings.num_parallel_calls, deferred=consumer != 'float'),
                                            is_training=True)
    batch = tf.data.make_one_shot_iterator(dataset).get_next()
    if consumer == 'cpu':
      fetch = tf.reduce_sum(clip_decode.finish_clips(batch[0], 'rgb', batch[2]))
    else:
      # One element: the whole batch is computed, nothing is copied out to Python.
      fetch = batch[0][0, 0, 0, 0, 0]
  return graph, fetch


def clip_pipeline_cpu_consumer(data, settings):
  return clip_pipeline(data, settings, consumer='cpu')


def clip_pipeline_float(data, settings):
  return clip_pipeline(data, settings, consumer='float')


def breakdown(data, settings):
  """Prints the single-core ms per clip of each step of the training map function and the
  consumer, one JSON line per step, medians over settings.rounds rounds.

  Steps are the library's own functions (clip_reader.read_frames, clip_input's
  decode_and_crop_frames, decode_clip and finish_clips), fed the first train video's index
  entry with a fixed start and crop, one thread. Each `lib_` line is the cumulative cost of
  the map function up to that step; `consumer_` is the clone's share (on the GPU in a GPU
  run); `alt_decode_loop` is the decode bound's loop over the same frames (decode only,
  nothing stacked); `alt_map_fn_window` the decode-and-window loop the pipeline had before
  each frame got a decoded flag (a tf.map_fn, no flag). Checked first: a clip flipped in
  the pipeline and one flipped by finish_clips are equal.
  """
  tf = tf_module()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.formats import video_records  # pylint: disable=import-outside-toplevel
  split = dataset_factory.get_dataset('video_folder', 'train', data['records_dir'])
  shard = sorted(tf.io.gfile.glob(split.file_pattern))[0]
  entry = next(tf.compat.v1.io.tf_record_iterator(video_records.index_path(shard)))
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    serialized = tf.placeholder(tf.string, [])
    steps, same = _breakdown_steps(tf, tf.constant(shard), serialized, settings.clip_frames,
                                   settings.crop_size)
  config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
  with tf.Session(graph=graph, config=config) as sess:
    if not sess.run(same, {serialized: entry}):
      raise RuntimeError('finish_clips flips differently from the pipeline\'s flip')
    times = _time_steps(sess, steps, {serialized: entry}, settings.rounds)
  decode = statistics.median(times['alt_decode_loop'])
  for name in steps:
    median = statistics.median(times[name])
    print(json.dumps({'step': name, 'ms_per_clip': round(median, 2),
                      'ms_over_decode_loop': round(median - decode, 2),
                      'rounds': [round(t, 2) for t in times[name]]}))


def _breakdown_steps(tf, shard, serialized, length, size):
  """-> ({step name: fetch}, bool scalar: both ways of flipping give the same clip), built
  on the string scalar `serialized` (one video's index entry in `shard`), start frame 3,
  crop at (16, 58)."""
  # pylint: disable-next=import-outside-toplevel
  from datasets.formats import video_records
  from datasets.inputs import clip_decode, clip_reader  # pylint: disable=import-outside-toplevel
  steps = {}
  video = video_records.parse_index_entry(serialized)
  indices = (3 + tf.range(length)) % tf.cast(video['frame_bounds'][-1], tf.int32)
  frames, local = clip_reader.read_frames(shard, video, indices, 'rgb')
  unique, _ = tf.unique(local)
  chosen = tf.gather(frames, unique)
  steps['lib_read_select'] = tf.strings.length(chosen[0])
  offsets = lambda height, width: (tf.constant(16), tf.constant(58))
  window, _ = clip_decode.decode_and_crop_frames(chosen, 'rgb', size, offsets)
  steps['lib_+decode_and_crop'] = window[0, 0, 0, 0]
  library = {}
  for flip in (False, True):
    library[flip], _ = clip_decode.decode_clip(frames, local, 'rgb', size, offsets,
                                               tf.constant(flip))
    steps['lib_clip_%s' % ('flipped' if flip else 'not_flipped')] = library[flip][0, 0, 0, 0]
  finished = clip_decode.finish_clips(library[False][None], 'rgb', tf.constant([True]))
  steps['consumer_finish_flipped'] = finished[0, 0, 0, 0, 0]

  # The decode before frames got a flag each (damaged_frames): one tf.map_fn over the
  # frames, decode then window, which fails the whole clip on one bad JPEG.
  steps['alt_map_fn_window'] = tf.map_fn(
      lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3, dct_method=baselines.DCT_METHOD)[
          16:16 + size, 58:58 + size, :], chosen,
      fn_output_signature=tf.TensorSpec([size, size, 3], tf.uint8))[0, 0, 0, 0]

  def loop_body(i, checksum):
    image = tf.io.decode_jpeg(chosen[i], channels=3, dct_method=baselines.DCT_METHOD)
    return i + 1, checksum + tf.cast(image[0, 0, 0], tf.int64)
  steps['alt_decode_loop'] = tf.while_loop(
      lambda i, _: i < length, loop_body, (tf.constant(0), tf.constant(0, tf.int64)),
      parallel_iterations=1)[1]
  same = tf.reduce_all(tf.equal(finished, clip_decode.finish_clips(library[True][None])))
  return steps, same


def _time_steps(sess, steps, feed, timed_rounds):
  """{step name: [ms per run, one per timed round]}: each step run 5 times per round, in
  the harness's alternating rounds (the warm-up round's dropped)."""
  def ms_per_run(fetch):
    return lambda _: 1000 * rounds.seconds_per_call(lambda: sess.run(fetch, feed), 5)
  return rounds.alternate({name: ms_per_run(fetch) for name, fetch in steps.items()},
                          timed_rounds).samples
