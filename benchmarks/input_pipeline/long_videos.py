"""The long-video case (`--long_videos`, issue 13 item 4): does a clip cost the same
whatever its video's length?

Two synthetic sets of the same videos but for their length, one of `--clip_frames` frames
(64) and one of `--long_frames` (300), converted alike (256 short side, default chunks).
Measured in alternating rounds after a discarded warm-up round:
  train_short, train_long   the training pipeline as `clip_pipeline` measures it (random
                  start, crop, flip bit, uint8 clips), clips/s and bytes read per clip.
  eval_long, eval_short     whole-video evaluation, `build_clip_dataset(eval_frames=N)`
                  (`--eval_frames`, 250: the first 250 frames, looped if shorter), centre
                  crop, batch 1, videos/s and bytes read per video.
"Bytes read" are the bytes this process asked the kernel to read while the timed batches
ran: /proc/self/io `rchar` (every read() and pread() of every thread, page cache or not;
the pipeline's reads are the only file reads in that window), summed over the rounds and
divided by the clips drawn. Their yardstick, "chosen bytes", is the JPEG bytes of the
frames a clip uses, averaged over the sampling (every train video equally, every start
equally; for evaluation the first N frames of each test video), computed from the records.
"index bytes" is what the index says the reader should read for the same sampling, and
"whole-video bytes" what reading whole videos would cost (format 1), both for context.
"""

import bisect
import json
import os
import statistics

from benchmarks.input_pipeline import clips, converter, tf_module
from benchmarks.input_pipeline.report import machine_line
from training.doctor import rounds

_TRAIN_TARGET = 0.9   # long / short clips/s
_BYTES_TARGET = 1.5   # bytes read / chosen bytes


def read_bytes():
  """This process's /proc/self/io rchar: bytes requested from files so far."""
  with open('/proc/self/io') as handle:
    return next(int(line.split()[1]) for line in handle if line.startswith('rchar:'))


def run(settings, work_dir):
  """Prepares both sets, alternates the measurements, prints one JSON line each, the
  ratios and the machine line."""
  sets = {name: _prepare(settings, work_dir, name, frames)
          for name, frames in (('short', settings.clip_frames),
                               ('long', settings.long_frames))}
  measures = {'train_short': ('train', sets['short']), 'train_long': ('train', sets['long']),
              'eval_long': ('eval', sets['long']), 'eval_short': ('eval', sets['short'])}
  samples = rounds.alternate(
      {name: lambda _, kind=kind, data=data: _measure(kind, data, settings)
       for name, (kind, data) in measures.items()}, settings.rounds,
      after_round=lambda index, _: print('# round %d of %d done' % (index, settings.rounds),
                                         flush=True)).samples
  _report(settings, measures, samples)
  print(machine_line())


def _prepare(settings, work_dir, name, frames):
  """Videos of exactly `frames` frames, their records and the bytes of their frames."""
  # pylint: disable-next=import-outside-toplevel
  from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
  made = make_synthetic_videos(
      os.path.join(work_dir, name + '_source'), num_classes=settings.num_classes,
      videos_per_class=settings.videos_per_class, min_frames=frames, max_frames=frames,
      sizes=(settings.video_shape,), fps=25, seed=0)
  data = {'video_dir': made['video_dir'], 'splits_dir': made['split_dir'],
          'records_dir': os.path.join(work_dir, name + '_records'), 'frames': frames}
  converted = converter.convert(data, data['records_dir'], short_side=settings.short_side,
                                num_processes=settings.num_processes)
  print('# %s: %d videos of %d frames converted in %.1f s' % (
      name, converted['videos'], frames, converted['seconds']), flush=True)
  data['train'] = _frame_sizes(data['records_dir'], 'train')
  data['test'] = _frame_sizes(data['records_dir'], 'test')
  return data


def _frame_sizes(records_dir, split_name):
  """[(JPEG size of each frame, chunk frame bounds, chunk byte bounds)] per video."""
  tf = tf_module()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.conversion import video_shards  # pylint: disable=import-outside-toplevel
  split = dataset_factory.get_dataset('video_folder', split_name, records_dir)
  videos = []
  for path in sorted(tf.io.gfile.glob(split.file_pattern)):
    for entry, chunks in video_shards.read_video_shard(path):
      sizes = [len(f.bytes_list.value[0]) for chunk in chunks for f in
               tf.train.SequenceExample.FromString(chunk).feature_lists.feature_list[
                   'image/encoded'].feature]
      videos.append((sizes, entry['frame_bounds'], entry['byte_bounds']))
  return videos


def _expected(videos, clip_frames, starts_of):
  """(chosen bytes, index bytes, whole-video bytes), means over videos and their starts:
  the distinct frames' JPEG bytes, the byte ranges of the chunks holding them, the video."""
  chosen, index, whole = [], [], []
  for sizes, frame_bounds, byte_bounds in videos:
    count = len(sizes)
    for start in starts_of(count):
      frames = sorted({(start + t) % count for t in range(clip_frames)})
      chunks = {bisect.bisect_right(frame_bounds, f) - 1 for f in frames}
      chosen.append(sum(sizes[f] for f in frames))
      index.append(sum(byte_bounds[k + 1] - byte_bounds[k] for k in chunks))
    whole.append(sum(sizes))
  return statistics.mean(chosen), statistics.mean(index), statistics.mean(whole)


def _measure(kind, data, settings):
  """{'rate': clips (videos) per second, 'bytes': bytes read, 'clips': clips drawn}."""
  tf = tf_module()
  if kind == 'train':
    graph, fetch = clips.training_graph(data['records_dir'], settings)
    per_batch = settings.batch_size
  else:
    graph, fetch = _eval_graph(data['records_dir'], settings)
    per_batch = 1
  with tf.Session(graph=graph) as sess:
    for _ in range(settings.warmup_batches):
      sess.run(fetch)
    before = read_bytes()
    seconds = rounds.seconds_per_call(lambda: sess.run(fetch), settings.batches)
    read = read_bytes() - before
  clips_drawn = settings.batches * per_batch
  return {'rate': per_batch / seconds, 'bytes': read, 'clips': clips_drawn}


def _eval_graph(records_dir, settings):
  """(graph, fetch): one test video's --eval_frames clip (uint8, centre crop) per run."""
  tf = tf_module()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.inputs import clip_input  # pylint: disable=import-outside-toplevel
  from datasets.inputs.input_settings import (  # pylint: disable=import-outside-toplevel
      InputSettings, Sampling)
  split = dataset_factory.get_dataset('video_folder', 'test', records_dir)
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    dataset = clip_input.build_clip_dataset(split, InputSettings.for_sampling(
        Sampling.first_frames(settings.eval_frames, settings.crop_size), batch_size=1,
        num_readers=settings.num_readers, num_parallel_calls=settings.num_parallel_calls,
        num_epochs=1000000, deferred=True), is_training=False)
    fetch = tf.data.make_one_shot_iterator(dataset).get_next()[0][0, 0, 0, 0, 0]
  return graph, fetch


def _report(settings, measures, samples):
  """One line per measurement, then the two targets' ratios."""
  lines = {}
  for name, (kind, data) in measures.items():
    length = settings.clip_frames if kind == 'train' else settings.eval_frames
    videos = data['train'] if kind == 'train' else data['test']
    starts = range if kind == 'train' else (lambda count: [0])
    chosen, index, whole = _expected(videos, length, starts)
    read = sum(r['bytes'] for r in samples[name]) / sum(r['clips'] for r in samples[name])
    lines[name] = dict(
        measurement=name, video_frames=data['frames'], clip_frames=length,
        clips_per_sec=round(statistics.median(r['rate'] for r in samples[name]), 2),
        rounds=[round(r['rate'], 2) for r in samples[name]],
        bytes_read_per_clip=round(read), chosen_bytes_per_clip=round(chosen),
        read_over_chosen=round(read / chosen, 3), index_bytes_per_clip=round(index),
        whole_video_bytes=round(whole), bytes_counted_by='/proc/self/io rchar')
    print(json.dumps(lines[name]))
  median, per_round = rounds.median_ratio([r['rate'] for r in samples['train_long']],
                             [r['rate'] for r in samples['train_short']])
  print(json.dumps({'ratio': 'train_long / train_short (clips/s)', 'median': median,
                    'ratios': per_round, 'target': _TRAIN_TARGET,
                    'met': median >= _TRAIN_TARGET}))
  for name in ('train_long', 'eval_long'):
    value = lines[name]['read_over_chosen']
    print(json.dumps({'ratio': '%s bytes read / chosen bytes' % name, 'value': value,
                      'target_at_most': _BYTES_TARGET, 'met': value <= _BYTES_TARGET}))
