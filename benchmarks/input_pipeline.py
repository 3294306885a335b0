"""Video input throughput: training clips/s against the JPEG-decode bound and a frame-folder
loader, and converter videos/s against ffmpeg, all measured in the same run.

    python benchmarks/input_pipeline.py                  # defaults: about 5 minutes
    python benchmarks/input_pipeline.py --rounds=3 --videos_per_class=6
    python benchmarks/input_pipeline.py --breakdown      # single-core cost of each step

Data: `make_synthetic_videos` writes UCF-like .avi files (240 x 320, 25 fps, 64 to 120
frames) into a temporary directory; `convert_videos` turns them into clip records with
256-short-side JPEG frames (256 x 341), and the train frames are also written, byte for
byte, as a frame-folder tree `jpegs_256/<video_id>/frame000001.jpg`. So every clip
measurement decodes the very same JPEGs.

Measurements, each in clips/s of 64 x 224 x 224 x 3 clips:
  clip_pipeline   `build_clip_dataset(is_training=True, deferred=True)` as training reads
                  it (random start, crop, flip bit; uint8 clips), batches pulled by a
                  tf.compat.v1 Session on /device:CPU:0. The clone's `finish_clips`
                  (scale to [-1, 1] and flip, about 60 MB of float work per batch) runs on
                  the GPU in a GPU run and is not counted. The targets are judged on it.
  clip_pipeline_cpu_consumer  the same with `finish_clips` on this CPU and the batch
                  summed: what a CPU-only run pays. For context.
  clip_pipeline_float  `deferred=False`: the pipeline scales and flips itself and emits
                  float32 clips in [-1, 1]. For context.
  decode_bound    the machine's JPEG-decode bound: one process per core decodes the same
                  frames in a tight TensorFlow loop with the pipeline's decoder
                  (tf.io.decode_jpeg, channels=3, dct_method='INTEGER_ACCURATE'), 256
                  frames per session call, one intra/inter-op thread per process. It
                  counts the decode only: no record reading, no crop, no flip, no scaling,
                  no batching. frames/s / clip_frames gives clips/s. Each process also
                  checks it is not measuring Python: 16 frames per call must decode about
                  as fast as 256 (`small_call_speed` near 1).
  frame_folder_*  the I3D_Finetune way (its lib/video_3d.py): per clip, Python picks a
                  random start, opens 64 JPEG files with PIL (`Image.open(f).convert('RGB')`,
                  libjpeg's accurate integer DCT like the pipeline), takes one random 224
                  crop and a random flip in NumPy and scales to [-1, 1] in float32.
                  `_python` runs it in one Python loop filling each batch;
                  `_tfdata` runs it as I3D_Finetune does, in tf.data through
                  tf.numpy_function with num_parallel_calls = cores (PIL and NumPy release
                  the GIL while decoding and converting). The faster of the two is the
                  baseline of the 2x target. `_i3d_code` is, for context, I3D_Finetune's
                  own per-clip code (PIL crop and mirror per frame, float64 scaling) in the
                  same tf.data setting.
Converter, in videos/s and frames/s over every listed video (train and test):
  converter       `convert_videos(short_side=256, num_workers=cores, modality='rgb')`
                  into a fresh directory: decode, resize, JPEG-encode, write records.
  ffmpeg          `ffmpeg -threads 1 -i V -filter_threads 1 -vf scale=W:H:flags=bilinear
                  -threads 1 -q:v 2 out/frame%06d.jpg`, one process per core, W x H the
                  converter's frame size (341 x 256, checked on the output).

This machine's run-to-run noise is about +-15 %, so the measurements alternate over
`--rounds` rounds in one process after one discarded warm-up round, and each figure that
counts is the median over rounds of a per-round ratio. Prints one JSON line per
measurement, one per ratio, and a machine line.

TensorFlow is imported inside functions: spawned worker processes (the converter's and
the decode bound's) re-import this script, and the converter's workers must start without
TensorFlow, as `datasets.conversion.video_frames` intends.
"""

import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # pylint: disable=wrong-import-position

import clip_baselines  # pylint: disable=wrong-import-position  (this directory)

flags.DEFINE_integer('rounds', 7, 'Alternating rounds after the warm-up; medians reported.')
flags.DEFINE_integer('batch_size', 6, 'Clips per batch (I3D_Finetune trains with 6).')
flags.DEFINE_integer('batches', 12, 'Timed batches per clip measurement.')
flags.DEFINE_integer('warmup_batches', 3, 'Untimed batches per clip measurement.')
flags.DEFINE_integer('clip_frames', 64, 'Frames per clip.')
flags.DEFINE_integer('crop_size', 224, 'Clip height and width.')
flags.DEFINE_integer('num_readers', 4, 'build_clip_dataset num_readers.')
flags.DEFINE_integer('num_parallel_calls', os.cpu_count(), 'Parallel clips in the record '
                     'pipeline and in the tf.data frame-folder loader (default: cores).')
flags.DEFINE_integer('num_workers', os.cpu_count(), 'Decode-bound processes, converter '
                     'workers and parallel ffmpeg processes (default: cores).')
flags.DEFINE_float('decode_seconds', 3.0, 'Seconds each decode-bound process decodes.')
flags.DEFINE_integer('num_classes', 4, 'Synthetic classes.')
flags.DEFINE_integer('videos_per_class', 12, 'Synthetic videos per class (3/4 train).')
flags.DEFINE_integer('min_frames', 64, 'Shortest synthetic video (>= clip_frames, so every '
                     'clip decodes clip_frames distinct frames).')
flags.DEFINE_integer('max_frames', 120, 'Longest synthetic video.')
flags.DEFINE_string('video_size', '240x320', 'HEIGHTxWIDTH of the synthetic videos.')
flags.DEFINE_integer('short_side', 256, 'Short side of the converted frames.')
flags.DEFINE_bool('clips', True, 'Measure the clip pipeline against the decode bound and '
                  'the frame-folder loaders.')
flags.DEFINE_bool('converter', True, 'Measure the converter against ffmpeg.')
flags.DEFINE_string('conversion_dir', None, 'Where the converter and ffmpeg write each round '
                    '(default: inside the work directory; e.g. /dev/shm leaves the disk out).')
flags.DEFINE_bool('breakdown', False, 'Instead of the comparison: single-core ms per clip of '
                  'each step of the training map function, and of alternatives.')
flags.DEFINE_string('work_dir', None, 'New or empty directory for the data, kept '
                    '(default: a temporary directory, removed at the end).')
FLAGS = flags.FLAGS

_tf = clip_baselines.tf_module


def _settings():
  """The flags clip_baselines' measures share, read once."""
  return clip_baselines.ClipSettings(
      batch_size=FLAGS.batch_size, clip_frames=FLAGS.clip_frames, crop_size=FLAGS.crop_size,
      batches=FLAGS.batches, warmup_batches=FLAGS.warmup_batches,
      num_parallel_calls=FLAGS.num_parallel_calls, num_workers=FLAGS.num_workers,
      decode_seconds=FLAGS.decode_seconds)


# ----------------------------------------------------------------------------- data


def _prepare(work_dir):
  """Videos, records (the converter's warm-up run) and the frame-folder tree.

  Returns a dict: video_dir, splits_dir, records_dir, folder_dir, train (list of
  (video_id, num_frames, label)), frame_paths (every train frame file), sizes
  (data_path -> (height, width) of the stored frames), videos and frames (all splits).
  """
  # pylint: disable-next=import-outside-toplevel
  from datasets.make_synthetic_videos import make_synthetic_videos
  height, width = (int(side) for side in FLAGS.video_size.lower().split('x'))
  start = time.perf_counter()
  made = make_synthetic_videos(
      os.path.join(work_dir, 'source'), num_classes=FLAGS.num_classes,
      videos_per_class=FLAGS.videos_per_class, min_frames=FLAGS.min_frames,
      max_frames=FLAGS.max_frames, sizes=((height, width),), fps=25, seed=0)
  print('# generated %d videos in %.1f s' % (len(made['videos']), time.perf_counter() - start),
        flush=True)
  data = {'video_dir': made['video_dir'], 'splits_dir': made['split_dir'],
          'records_dir': os.path.join(work_dir, 'records'),
          'folder_dir': os.path.join(work_dir, 'jpegs_256')}
  warmup = _convert(data, data['records_dir'])  # Also the converter's warm-up.
  print('# converted them in %.1f s (warm-up, not counted)' % warmup['seconds'], flush=True)
  data['videos'], data['frames'] = warmup['videos'], warmup['frames']
  data.update(_write_frame_folders(data['records_dir'], data['folder_dir']))
  return data


def _write_frame_folders(records_dir, folder_dir):
  """Writes the train records' JPEGs as jpegs_256/<video_id>/frameNNNNNN.jpg."""
  tf = _tf()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  train, frame_paths, sizes = [], [], {}
  for split_name in ('train', 'test'):
    split = dataset_factory.get_dataset('video_folder', split_name, records_dir)
    for path in sorted(tf.io.gfile.glob(split.file_pattern)):
      for serialized in tf.compat.v1.io.tf_record_iterator(path):
        example = tf.train.SequenceExample.FromString(serialized)
        context = example.context.feature
        video_id = context['example/id'].bytes_list.value[0].decode()
        data_path = context['clip/data_path'].bytes_list.value[0].decode()
        sizes[data_path] = (context['image/height'].int64_list.value[0],
                            context['image/width'].int64_list.value[0])
        if split_name != 'train':
          continue
        jpegs = [f.bytes_list.value[0]
                 for f in example.feature_lists.feature_list['image/encoded'].feature]
        os.makedirs(os.path.join(folder_dir, video_id))
        for index, jpeg in enumerate(jpegs, 1):
          frame_path = os.path.join(folder_dir, video_id,
                                    clip_baselines.FRAME_FILE % index)
          with open(frame_path, 'wb') as handle:
            handle.write(jpeg)
          frame_paths.append(frame_path)
        train.append((video_id, len(jpegs), context['clip/label/index'].int64_list.value[0]))
  return {'train': train, 'frame_paths': frame_paths, 'sizes': sizes}


# ----------------------------------------------------------------------------- clips


def _clip_pipeline(data, consumer=None):
  """clips/s of build_clip_dataset(is_training=True), the way training reads it.

  consumer=None: deferred=True, as training uses it; the batch of uint8 clips and flip
  bits is fetched, and the clone's `finish_clips` (scale and flip, on the GPU in a GPU
  run) is not counted. consumer='cpu': the same plus `finish_clips` on this CPU, all of
  the batch summed, as in a CPU-only run. consumer='float': deferred=False, the pipeline
  itself scales and flips.
  """
  tf = _tf()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.inputs import clip_input
  split = dataset_factory.get_dataset('video_folder', 'train', data['records_dir'])
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    dataset = clip_input.build_clip_dataset(
        split, batch_size=FLAGS.batch_size, clip_frames=FLAGS.clip_frames,
        crop_size=FLAGS.crop_size, is_training=True, num_readers=FLAGS.num_readers,
        num_parallel_calls=FLAGS.num_parallel_calls, deferred=consumer != 'float')
    batch = tf.data.make_one_shot_iterator(dataset).get_next()
    if consumer == 'cpu':
      fetch = tf.reduce_sum(clip_input.finish_clips(batch[0], 'rgb', batch[2]))
    else:
      # One element: the whole batch is computed, nothing is copied out to Python.
      fetch = batch[0][0, 0, 0, 0, 0]
  return clip_baselines.session_rate(tf, graph, fetch, _settings())


def _clip_pipeline_cpu_consumer(data):
  return _clip_pipeline(data, consumer='cpu')


def _clip_pipeline_float(data):
  return _clip_pipeline(data, consumer='float')


# ----------------------------------------------------------------------------- converter


def _convert(data, output_dir):
  # pylint: disable-next=import-outside-toplevel
  from datasets.convert_videos import VideoConversion, convert_videos
  start = time.perf_counter()
  manifest = convert_videos(VideoConversion(
      dataset_name='video_folder', video_dir=data['video_dir'],
      splits_dir=data['splits_dir'], output_dir=output_dir, short_side=FLAGS.short_side,
      num_workers=FLAGS.num_workers, modality='rgb', progress=False))
  seconds = time.perf_counter() - start
  if manifest['skipped']:
    raise RuntimeError('the converter skipped videos: %s' % manifest['skipped'])
  return {'seconds': seconds, 'videos': sum(manifest['videos'].values()),
          'frames': sum(manifest['frames'].values())}


def _ffmpeg_command(source, height, width, output_dir):
  return ['ffmpeg', '-nostdin', '-loglevel', 'error', '-threads', '1', '-i', source,
          '-filter_threads', '1', '-vf', 'scale=%d:%d:flags=bilinear' % (width, height),
          '-threads', '1', '-q:v', '2', os.path.join(output_dir, clip_baselines.FRAME_FILE)]


def _ffmpeg(data, output_dir):
  """Every listed video to a JPEG folder at the converter's size; num_workers at once."""
  def extract(item):
    data_path, (height, width) = item
    folder = os.path.join(output_dir, os.path.splitext(os.path.basename(data_path))[0])
    os.makedirs(folder)
    subprocess.run(_ffmpeg_command(os.path.join(data['video_dir'], data_path), height,
                                   width, folder), check=True)
    return len(os.listdir(folder))

  start = time.perf_counter()
  with futures.ThreadPoolExecutor(FLAGS.num_workers) as pool:
    frames = sum(pool.map(extract, sorted(data['sizes'].items())))
  return {'seconds': time.perf_counter() - start, 'videos': len(data['sizes']),
          'frames': frames}


def _check_ffmpeg_size(data, output_dir):
  """The ffmpeg frames have the converter's size and count (checked once)."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  data_path, (height, width) = sorted(data['sizes'].items())[0]
  folder = os.path.join(output_dir, os.path.splitext(os.path.basename(data_path))[0])
  with Image.open(os.path.join(folder, clip_baselines.FRAME_FILE % 1)) as image:
    if image.size != (width, height):
      raise RuntimeError('ffmpeg wrote %dx%d frames, the converter %dx%d'
                         % (image.size + (width, height)))


def _mean_jpeg_bytes(folder_root):
  sizes = [entry.stat().st_size for sub in os.scandir(folder_root) if sub.is_dir()
           for entry in os.scandir(sub.path)]
  return sum(sizes) / len(sizes)


# ----------------------------------------------------------------------------- breakdown


def _breakdown(data):
  """Single-core ms per clip of each step of the training map function and the consumer.

  Steps are the library's own functions (video_records.parse_clip, clip_input's
  _decode_window, _clip_at and finish_clips), fed one train record with a fixed start and
  crop, one thread. Each `lib_` line is the cumulative cost of the map function up to that
  step; `consumer_` is the clone's share (on the GPU in a GPU run); `alt_decode_loop` is
  the decode bound's loop over the same frames (decode only, nothing stacked). Checked
  first: a clip flipped in the pipeline and one flipped by finish_clips are equal.
  """
  tf = _tf()
  from datasets import video_records  # pylint: disable=import-outside-toplevel
  from datasets.inputs import clip_input
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  split = dataset_factory.get_dataset('video_folder', 'train', data['records_dir'])
  record = next(tf.compat.v1.io.tf_record_iterator(sorted(tf.io.gfile.glob(
      split.file_pattern))[0]))
  size, length = FLAGS.crop_size, FLAGS.clip_frames
  y, x = 16, 58
  graph = tf.Graph()
  steps = {}
  with graph.as_default(), tf.device('/device:CPU:0'):
    serialized = tf.placeholder(tf.string, [])
    _, frames = video_records.parse_clip(serialized, 'rgb')
    indices = (3 + tf.range(length)) % tf.shape(frames)[0]
    unique, _ = tf.unique(indices)
    chosen = tf.gather(frames, unique)
    steps['lib_parse_select'] = tf.strings.length(chosen[0])
    offsets = lambda height, width: (tf.constant(y), tf.constant(x))
    window = clip_input._decode_window(  # pylint: disable=protected-access
        chosen, 'rgb', size, offsets)
    steps['lib_+decode_and_crop'] = window[0, 0, 0, 0]
    library = {}
    for flip in (False, True):
      library[flip] = clip_input._clip_at(  # pylint: disable=protected-access
          frames, indices, 'rgb', size, offsets, tf.constant(flip))
      name = 'lib_clip_%s' % ('flipped' if flip else 'not_flipped')
      steps[name] = library[flip][0, 0, 0, 0]
    finished = clip_input.finish_clips(library[False][None], 'rgb', tf.constant([True]))
    steps['consumer_finish_flipped'] = finished[0, 0, 0, 0, 0]

    def loop_body(i, checksum):
      image = tf.io.decode_jpeg(chosen[i], channels=3, dct_method=clip_baselines.DCT_METHOD)
      return i + 1, checksum + tf.cast(image[0, 0, 0], tf.int64)
    steps['alt_decode_loop'] = tf.while_loop(
        lambda i, _: i < length, loop_body, (tf.constant(0), tf.constant(0, tf.int64)),
        parallel_iterations=1)[1]
    same = tf.reduce_all(tf.equal(finished, clip_input.finish_clips(library[True][None])))
  config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
  times = {name: [] for name in steps}
  with tf.Session(graph=graph, config=config) as sess:
    if not sess.run(same, {serialized: record}):
      raise RuntimeError('finish_clips flips differently from the pipeline\'s flip')
    for fetch in steps.values():
      sess.run(fetch, {serialized: record})
    for _ in range(FLAGS.rounds):
      for name, fetch in steps.items():
        start = time.perf_counter()
        for _ in range(5):
          sess.run(fetch, {serialized: record})
        times[name].append((time.perf_counter() - start) / 5 * 1000)
  decode = statistics.median(times['alt_decode_loop'])
  for name in steps:
    median = statistics.median(times[name])
    print(json.dumps({'step': name, 'ms_per_clip': round(median, 2),
                      'ms_over_decode_loop': round(median - decode, 2),
                      'rounds': [round(t, 2) for t in times[name]]}))


# ----------------------------------------------------------------------------- main


def _ratios(numerator, denominator):
  ratios = [n / d for n, d in zip(numerator, denominator)]
  return round(statistics.median(ratios), 3), [round(r, 3) for r in ratios]


def _machine_line():
  tf = _tf()
  import PIL  # pylint: disable=import-outside-toplevel
  ffmpeg = 'none'
  if shutil.which('ffmpeg'):
    ffmpeg = subprocess.run(['ffmpeg', '-version'], capture_output=True,
                            text=True).stdout.split()[2]
  return 'machine: %s, %d cores, Python %s, TensorFlow %s, Pillow %s, ffmpeg %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(), tf.__version__,
      PIL.__version__, ffmpeg)


def main(argv):
  del argv
  if FLAGS.min_frames < FLAGS.clip_frames:
    raise app.UsageError('--min_frames=%d must be >= --clip_frames=%d: shorter videos loop '
                         'and decode fewer distinct frames than the bound counts'
                         % (FLAGS.min_frames, FLAGS.clip_frames))
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix='input_pipeline_')
  try:
    data = _prepare(work_dir)
    if FLAGS.breakdown:
      _breakdown(data)
      print(_machine_line())
      return
    _compare(data, work_dir)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


def _compare(data, work_dir):
  has_ffmpeg = shutil.which('ffmpeg') is not None
  if FLAGS.converter and not has_ffmpeg:
    print('ffmpeg not found: the converter is measured alone; to compare it with ffmpeg '
          'run `apt-get install ffmpeg`', flush=True)
  clip_measures = {}
  if FLAGS.clips:
    settings = _settings()
    bound = clip_baselines.DecodeBound(data['frame_paths'], settings)
    clip_measures = {'clip_pipeline': _clip_pipeline,
                     'clip_pipeline_cpu_consumer': _clip_pipeline_cpu_consumer,
                     'clip_pipeline_float': _clip_pipeline_float, 'decode_bound': bound}
    for name in ('frame_folder_python', 'frame_folder_tfdata', 'frame_folder_i3d_code'):
      clip_measures[name] = functools.partial(getattr(clip_baselines, name),
                                              settings=settings)
  conversion_measures = {}
  if FLAGS.converter:
    conversion_measures = {'converter': _convert, 'ffmpeg': _ffmpeg}
    if not has_ffmpeg:
      del conversion_measures['ffmpeg']
  samples = {name: [] for name in clip_measures}
  conversions = {name: [] for name in conversion_measures}
  scratch = os.path.join(FLAGS.conversion_dir or work_dir, 'input_pipeline_scratch')
  try:
    for round_index in range(FLAGS.rounds + 1):  # Round 0 is the discarded warm-up.
      for name, measure in clip_measures.items():
        value = measure(data)
        if round_index:
          samples[name].append(value)
      for name, run in conversion_measures.items():
        shutil.rmtree(scratch, ignore_errors=True)
        os.sync()  # The previous round's files must not be written back during this one.
        result = run(data, scratch)
        if name == 'ffmpeg' and round_index == 0:
          _check_ffmpeg_size(data, scratch)
          data['ffmpeg_jpeg_bytes'] = _mean_jpeg_bytes(scratch)
        if round_index:
          conversions[name].append(result)
      print('# round %d of %d done' % (round_index, FLAGS.rounds), flush=True)
  finally:
    if FLAGS.clips:
      bound.close()
    shutil.rmtree(scratch, ignore_errors=True)
  _report(data, samples, conversions, bound.small_call_speed if FLAGS.clips else None)


def _report(data, samples, conversions, small_call_speed):
  if samples:
    _report_clips(samples, small_call_speed)
  _report_conversions(data, conversions)
  print(_machine_line())


def _report_clips(samples, small_call_speed):
  frames = FLAGS.clip_frames
  samples['decode_bound'] = [f / frames for f in samples['decode_bound']]  # -> clips/s
  common = {'batch_size': FLAGS.batch_size, 'clip': [frames, FLAGS.crop_size,
                                                     FLAGS.crop_size, 3]}
  extra = {
      'clip_pipeline': {'num_readers': FLAGS.num_readers,
                        'num_parallel_calls': FLAGS.num_parallel_calls,
                        'output': 'uint8 + flip bits (deferred=True); finish_clips on '
                                  'the clone device, not counted'},
      'clip_pipeline_cpu_consumer': {'output': 'deferred=True, finish_clips on this CPU '
                                               'and a sum of the batch, counted'},
      'clip_pipeline_float': {'output': 'float32 [-1, 1] from the pipeline '
                                        '(deferred=False)'},
      'decode_bound': {'processes': FLAGS.num_workers,
                       'frames_per_call': clip_baselines.FRAMES_PER_CALL,
                       'frames_per_sec': round(statistics.median(samples['decode_bound'])
                                               * frames, 1),
                       'small_call_speed': round(small_call_speed, 3),
                       'counts': 'decode only'},
      'frame_folder_python': {'threads': 1},
      'frame_folder_tfdata': {'num_parallel_calls': FLAGS.num_parallel_calls},
      'frame_folder_i3d_code': {'num_parallel_calls': FLAGS.num_parallel_calls},
  }
  for name, values in samples.items():
    print(json.dumps(dict({'measurement': name, 'clips_per_sec':
                           round(statistics.median(values), 2),
                           'rounds': [round(v, 2) for v in values]},
                          **common, **extra[name])))
  folder = max(('frame_folder_python', 'frame_folder_tfdata'),
               key=lambda name: statistics.median(samples[name]))
  lines = [('clip_pipeline', 'decode_bound', 0.8), ('clip_pipeline', folder, 2.0),
           ('clip_pipeline', 'frame_folder_i3d_code', None),
           ('clip_pipeline_cpu_consumer', 'decode_bound', None),
           ('clip_pipeline_cpu_consumer', folder, None),
           ('clip_pipeline_float', 'decode_bound', None),
           ('clip_pipeline_float', folder, None)]
  for measured, baseline, target in lines:
    name = '%s / %s' % (measured, baseline)
    median, ratios = _ratios(samples[measured], samples[baseline])
    line = {'ratio': name, 'median': median, 'ratios': ratios}
    if target:
      line.update(target=target, met=median >= target)
    else:
      line.update(note='context: the targets are judged on clip_pipeline above')
    print(json.dumps(line))


def _report_conversions(data, conversions):
  jpeg_bytes = {'converter': _mean_jpeg_bytes(data['folder_dir']),
                'ffmpeg': data.get('ffmpeg_jpeg_bytes')}
  for name, results in conversions.items():
    print(json.dumps({
        'measurement': name,
        'videos_per_sec': round(statistics.median(r['videos'] / r['seconds']
                                                  for r in results), 2),
        'frames_per_sec': round(statistics.median(r['frames'] / r['seconds']
                                                  for r in results), 1),
        'videos': results[0]['videos'], 'frames': results[0]['frames'],
        'mean_jpeg_bytes': round(jpeg_bytes[name] or 0),
        'seconds': [round(r['seconds'], 2) for r in results]}))
  if conversions.get('converter') and conversions.get('ffmpeg'):
    median, ratios = _ratios([r['seconds'] for r in conversions['ffmpeg']],
                             [r['seconds'] for r in conversions['converter']])
    print(json.dumps({'ratio': 'converter / ffmpeg (videos/s)', 'median': median,
                      'ratios': ratios}))


if __name__ == '__main__':
  app.run(main)
