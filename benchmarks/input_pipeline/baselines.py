"""The baselines of the input benchmark: frame-folder clip loaders and the machine's
JPEG-decode bound. See `benchmarks/input_pipeline/__main__.py`'s docstring for what each one
measures and why.

Every measure takes the benchmark's `InputPipelineSettings` (built once in `main()`) and
reads batch_size, clip_frames, crop_size, batches, warmup_batches, num_parallel_calls,
num_processes and decode_seconds from it. The decode-bound processes are spawned and import
this module: it imports TensorFlow only inside functions.
"""

import os
import random
import time

import numpy as np

from benchmarks.input_pipeline import tf_module
from training.doctor import rounds

DCT_METHOD = 'INTEGER_ACCURATE'    # what datasets/inputs/clip_input.py decodes with
FRAME_FILE = 'frame%06d.jpg'
SMALL_CALL = 16                    # frames per call of the Python-overhead check
FRAMES_PER_CALL = 256


def session_rate(tf, graph, fetch, settings):
  """clips/s of `fetch` (one batch per run) over settings.batches after the warm-up."""
  with tf.Session(graph=graph) as sess:
    return rounds.per_second(lambda: sess.run(fetch), settings.batches,
                             settings.batch_size, settings.warmup_batches)


def _load_folder_clip(settings, folder, num_frames, rng, out=None):
  """One training clip from a frame folder, the I3D_Finetune way, into `out` (float32)."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  size, length = settings.crop_size, settings.clip_frames
  start = rng.randint(0, max(num_frames - length, 0))
  window = np.empty((length, size, size, 3), np.uint8)
  for k in range(length):
    path = os.path.join(folder, FRAME_FILE % ((start + k) % num_frames + 1))
    with Image.open(path) as image:
      frame = np.asarray(image.convert('RGB'))
    if k == 0:
      y = rng.randint(0, frame.shape[0] - size)
      x = rng.randint(0, frame.shape[1] - size)
    window[k] = frame[y:y + size, x:x + size]
  if rng.random() < 0.5:
    window = window[:, :, ::-1]
  if out is None:
    out = np.empty(window.shape, np.float32)
  np.multiply(window, np.float32(1 / 127.5), out=out)
  np.subtract(out, np.float32(1), out=out)
  return out


def frame_folder_python(data, settings):
  """One Python loop: each batch a fresh float32 array filled clip by clip."""
  rng = random.Random()
  videos = [(os.path.join(data['folder_dir'], video_id), n, label)
            for video_id, n, label in data['train']]
  size = settings.crop_size
  shape = (settings.batch_size, settings.clip_frames, size, size, 3)

  def batch():
    clips = np.empty(shape, np.float32)
    labels = np.empty(settings.batch_size, np.int64)
    for b in range(settings.batch_size):
      folder, num_frames, labels[b] = rng.choice(videos)
      _load_folder_clip(settings, folder, num_frames, rng, out=clips[b])
    return clips, labels

  return rounds.per_second(batch, settings.batches, settings.batch_size,
                           settings.warmup_batches)


def _load_folder_clip_i3d(settings, folder, num_frames, rng):
  """The same clip by I3D_Finetune's own code path, re-implemented step by step.

  lib/video_3d.py get_frames: 1-based start in [1, max(n - T, 0) + 1], PIL open and
  convert per frame; lib/data_augment.py transform_data: PIL crop, then ImageOps.mirror
  per frame (its resize to 256 is a no-op on 256-short-side frames); finetune.py
  process_video: np.stack, 2 * (x / 255) - 1 in float64, then float32.
  """
  from PIL import Image, ImageOps  # pylint: disable=import-outside-toplevel
  size, length = settings.crop_size, settings.clip_frames
  start = rng.randint(1, max(num_frames - length, 0) + 1)
  frames = [Image.open(os.path.join(folder, FRAME_FILE % ((i - 1) % num_frames + 1)))
            .convert('RGB') for i in range(start, start + length)]
  width, height = frames[0].size
  x0, y0 = rng.randint(0, width - size), rng.randint(0, height - size)
  frames = [frame.crop((x0, y0, x0 + size, y0 + size)) for frame in frames]
  if rng.randint(0, 1) == 0:
    frames = [ImageOps.mirror(frame) for frame in frames]
  clip = np.stack([np.asarray(frame) for frame in frames])
  return np.array(2 * (clip / 255) - 1, dtype='float32')


def frame_folder_tfdata(data, settings, load_clip=_load_folder_clip):
  """I3D_Finetune's finetune.py: shuffled video list -> map(py_func) -> batch -> prefetch."""
  tf = tf_module()
  from datasets.inputs import record_files  # pylint: disable=import-outside-toplevel
  rng = random.Random()
  videos = [(os.path.join(data['folder_dir'], video_id), n, label)
            for video_id, n, label in data['train']]

  def load(index):
    folder, num_frames, label = videos[int(index)]
    return load_clip(settings, folder, num_frames, rng), np.int64(label)

  def parse(index):
    clip, label = tf.numpy_function(load, [index], [tf.float32, tf.int64], stateful=True)
    clip.set_shape([settings.clip_frames, settings.crop_size, settings.crop_size, 3])
    return clip, label

  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    dataset = tf.data.Dataset.range(len(videos)).shuffle(len(videos)).repeat()
    dataset = dataset.map(parse, num_parallel_calls=settings.num_parallel_calls)
    dataset = dataset.batch(settings.batch_size, drop_remainder=True).prefetch(2)
    # The library pipeline's options (autotune off, any order), for a like-for-like run.
    dataset = dataset.with_options(record_files.pipeline_options(deterministic=False))
    clips, _ = tf.data.make_one_shot_iterator(dataset).get_next()
    fetch = clips[0, 0, 0, 0, 0]
  return session_rate(tf, graph, fetch, settings)


def frame_folder_i3d_code(data, settings):
  return frame_folder_tfdata(data, settings, _load_folder_clip_i3d)


def _decode_worker(paths, offset, seconds, commands, results, barrier):
  """One process, one core: decodes the JPEGs of `paths` in a loop on command."""
  tf = tf_module()
  jpegs = []
  for path in paths:
    with open(path, 'rb') as handle:
      jpegs.append(handle.read())
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    all_jpegs = tf.constant(np.array(jpegs, dtype=object))
    first = tf.placeholder(tf.int32, [])
    count = tf.placeholder(tf.int32, [])

    def body(i, checksum):
      jpeg = tf.gather(all_jpegs, (first + i) % len(jpegs))
      image = tf.io.decode_jpeg(jpeg, channels=3, dct_method=DCT_METHOD)
      return i + 1, checksum + tf.cast(image[0, 0, 0], tf.int64)

    _, checksum = tf.while_loop(lambda i, _: i < count, body,
                                (tf.constant(0), tf.constant(0, tf.int64)),
                                parallel_iterations=1)
  config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
  position = offset

  def decode(frames_per_call, duration):
    """frames/s decoding calls of `frames_per_call` frames for about `duration` s."""
    nonlocal position
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < duration:
      sess.run(checksum, {first: position, count: frames_per_call})
      position = (position + frames_per_call) % len(jpegs)
      done += frames_per_call
    return done / (time.perf_counter() - start)

  with tf.Session(graph=graph, config=config) as sess:
    decode(FRAMES_PER_CALL, 1.0)  # Warm-up.
    small = decode(SMALL_CALL, 1.0)
    large = decode(FRAMES_PER_CALL, 1.0)
    results.put(('ready', small / large))
    while commands.get():
      barrier.wait()
      results.put(('rate', decode(FRAMES_PER_CALL, seconds)))


class DecodeBound:
  """settings.num_processes spawned processes, each decoding all the frames on one core."""

  def __init__(self, paths, settings):
    import multiprocessing  # pylint: disable=import-outside-toplevel
    context = multiprocessing.get_context('spawn')
    workers = settings.num_processes
    self._results = context.Queue()
    self._barrier = context.Barrier(workers)
    self._commands = [context.Queue() for _ in range(workers)]
    self._processes = [
        context.Process(target=_decode_worker, daemon=True,
                        args=(paths, k * len(paths) // workers, settings.decode_seconds,
                              self._commands[k], self._results, self._barrier))
        for k in range(workers)]
    for process in self._processes:
      process.start()
    checks = [self._get('ready') for _ in self._processes]
    self.small_call_speed = min(checks)

  def _get(self, kind):
    got, value = self._results.get(timeout=600)
    assert got == kind, (got, kind)
    return value

  def __call__(self, _):
    """Frames/s of all processes together, started at once."""
    for queue in self._commands:
      queue.put(True)
    return sum(self._get('rate') for _ in self._processes)

  def close(self):
    for queue in self._commands:
      queue.put(False)
    for process in self._processes:
      process.join(timeout=10)
