"""Video input throughput: training clips/s against the JPEG-decode bound and a frame-folder
loader, and converter videos/s against ffmpeg, all measured in the same run.

    python -m benchmarks.input_pipeline                  # defaults: about 5 minutes
    python -m benchmarks.input_pipeline --rounds=3 --videos_per_class=6
    python -m benchmarks.input_pipeline --breakdown      # single-core cost of each step
    python -m benchmarks.input_pipeline --long_videos    # 300- against 64-frame videos

Run from the repository root. The measurements live beside this file, one module per
concept (see the package docstring); this one defines the flags and alternates the rounds.

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
  converter       `convert_videos(short_side=256, num_processes=cores, modality='rgb')`
                  into a fresh directory: decode, resize, JPEG-encode, write records.
  ffmpeg          `ffmpeg -threads 1 -i V -filter_threads 1 -vf scale=W:H:flags=bilinear
                  -threads 1 -q:v 2 out/frame%06d.jpg`, one process per core, W x H the
                  converter's frame size (341 x 256, checked on the output).

Long videos (`--long_videos`, instead of the above): training clips/s and bytes read per
clip on 300-frame against 64-frame videos, and whole-video evaluation; see `long_videos`.

This machine's run-to-run noise is about +-15 %, so the measurements alternate over
`--rounds` rounds in one process after one discarded warm-up round (the harness of
training/doctor/rounds.py), and each figure that
counts is the median over rounds of a per-round ratio. Prints one JSON line per
measurement, one per ratio, and a machine line.

Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import functools
import os
import shutil
import tempfile

from absl import app, flags

from benchmarks.input_pipeline import (baselines, clips, converter, long_videos, report,
                                       video_data)
from benchmarks.input_pipeline.settings import InputPipelineSettings, check_settings
from core import errors
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from training.doctor import rounds

define_flags(InputPipelineSettings)
FLAGS = flags.FLAGS


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(InputPipelineSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  work_dir = settings.work_dir or tempfile.mkdtemp(prefix='input_pipeline_')
  try:
    if settings.long_videos:
      long_videos.run(settings, work_dir)
      return errors.OK
    data = video_data.prepare(settings, work_dir)
    if settings.breakdown:
      clips.breakdown(data, settings)
      print(report.machine_line())
    else:
      compare(data, settings, work_dir)
  finally:
    if not settings.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)
  return errors.OK


def compare(data, settings, work_dir):
  """Alternates the measurements over settings.rounds rounds after one discarded warm-up
  round (round 0), then prints the report."""
  has_ffmpeg = shutil.which('ffmpeg') is not None
  if settings.converter and not has_ffmpeg:
    print('ffmpeg not found: the converter is measured alone; to compare it with ffmpeg '
          'run `apt-get install ffmpeg`', flush=True)
  bound = baselines.DecodeBound(data['frame_paths'], settings) if settings.clips else None
  clip_measures = _clip_measures(settings, bound) if settings.clips else {}
  conversion_measures = _conversion_measures(settings, has_ffmpeg)
  scratch = os.path.join(settings.conversion_dir or work_dir, 'input_pipeline_scratch')
  measures = {name: functools.partial(_clip_round, measure, data)
              for name, measure in clip_measures.items()}
  measures.update({name: functools.partial(_conversion_round, name, run, data, scratch)
                   for name, run in conversion_measures.items()})
  try:
    samples = rounds.alternate(measures, settings.rounds, after_round=lambda index, _: print(
        '# round %d of %d done' % (index, settings.rounds), flush=True)).samples
  finally:
    if bound:
      bound.close()
    shutil.rmtree(scratch, ignore_errors=True)
  report.print_report(data, settings, {name: samples[name] for name in clip_measures},
                      {name: samples[name] for name in conversion_measures},
                      bound.small_call_speed if bound else None)


def _clip_round(measure, data, _):
  return measure(data)


def _conversion_round(name, run, data, scratch, round_index):
  """One conversion into an emptied `scratch`; in the warm-up round, ffmpeg's frames are
  checked and their JPEG size kept for the report."""
  shutil.rmtree(scratch, ignore_errors=True)
  os.sync()  # The previous round's files must not be written back during this one.
  result = run(data, scratch)
  if name == 'ffmpeg' and round_index == 0:
    converter.check_ffmpeg_size(data, scratch)
    data['ffmpeg_jpeg_bytes'] = converter.mean_jpeg_bytes(scratch)
  return result


def _clip_measures(settings, bound):
  """{name: fn(data) -> clips/s (decode_bound: frames/s)}, in the order they run."""
  def with_settings(fn):
    return functools.partial(fn, settings=settings)
  return {'clip_pipeline': with_settings(clips.clip_pipeline),
          'clip_pipeline_cpu_consumer': with_settings(clips.clip_pipeline_cpu_consumer),
          'clip_pipeline_float': with_settings(clips.clip_pipeline_float),
          'decode_bound': bound,
          'frame_folder_python': with_settings(baselines.frame_folder_python),
          'frame_folder_tfdata': with_settings(baselines.frame_folder_tfdata),
          'frame_folder_i3d_code': with_settings(baselines.frame_folder_i3d_code)}


def _conversion_measures(settings, has_ffmpeg):
  """{name: fn(data, output_dir) -> {'seconds', 'videos', 'frames'}}."""
  if not settings.converter:
    return {}
  measures = {'converter': functools.partial(converter.convert, short_side=settings.short_side,
                                             num_processes=settings.num_processes)}
  if has_ffmpeg:
    measures['ffmpeg'] = functools.partial(converter.ffmpeg, num_processes=settings.num_processes)
  return measures


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
