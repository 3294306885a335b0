"""Converter against ffmpeg, in videos/s and frames/s over every listed video.

`convert`: `convert_videos(short_side, num_processes, modality='rgb')` into a fresh
directory (decode, resize, JPEG-encode, write records). `ffmpeg`: one `ffmpeg -threads 1`
process per worker writing each video's frames as JPEGs at the converter's frame size.
"""

import os
import subprocess
import time
from concurrent import futures

from benchmarks.input_pipeline import baselines


def convert(data, output_dir, *, short_side, num_processes):
  """Converts every listed video of data['video_dir'] into `output_dir`.

  Returns {'seconds', 'videos', 'frames'}; RuntimeError if the converter skipped a video.
  """
  # pylint: disable-next=import-outside-toplevel
  from datasets.conversion.convert_videos import VideoConversion, convert_videos
  start = time.perf_counter()
  manifest = convert_videos(VideoConversion(
      dataset_name='video_folder', video_dir=data['video_dir'],
      splits_dir=data['splits_dir'], output_dir=output_dir, short_side=short_side,
      num_processes=num_processes, modality='rgb', progress=False))
  seconds = time.perf_counter() - start
  if manifest['skipped']:
    raise RuntimeError('the converter skipped videos: %s' % manifest['skipped'])
  return {'seconds': seconds, 'videos': sum(manifest['videos'].values()),
          'frames': sum(manifest['frames'].values())}


def ffmpeg_command(source, height, width, output_dir):
  """One video to <output_dir>/frameNNNNNN.jpg at width x height, one thread throughout."""
  return ['ffmpeg', '-nostdin', '-loglevel', 'error', '-threads', '1', '-i', source,
          '-filter_threads', '1', '-vf', 'scale=%d:%d:flags=bilinear' % (width, height),
          '-threads', '1', '-q:v', '2', os.path.join(output_dir, baselines.FRAME_FILE)]


def ffmpeg(data, output_dir, *, num_processes):
  """Every listed video to a JPEG folder at the converter's size; num_processes at once.

  Returns {'seconds', 'videos', 'frames'}.
  """
  def extract(item):
    data_path, (height, width) = item
    folder = os.path.join(output_dir, os.path.splitext(os.path.basename(data_path))[0])
    os.makedirs(folder)
    subprocess.run(ffmpeg_command(os.path.join(data['video_dir'], data_path), height,
                                  width, folder), check=True)
    return len(os.listdir(folder))

  start = time.perf_counter()
  with futures.ThreadPoolExecutor(num_processes) as pool:
    frames = sum(pool.map(extract, sorted(data['sizes'].items())))
  return {'seconds': time.perf_counter() - start, 'videos': len(data['sizes']),
          'frames': frames}


def check_ffmpeg_size(data, output_dir):
  """The ffmpeg frames have the converter's size (checked once, on the first video)."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  data_path, (height, width) = sorted(data['sizes'].items())[0]
  folder = os.path.join(output_dir, os.path.splitext(os.path.basename(data_path))[0])
  with Image.open(os.path.join(folder, baselines.FRAME_FILE % 1)) as image:
    if image.size != (width, height):
      raise RuntimeError('ffmpeg wrote %dx%d frames, the converter %dx%d'
                         % (image.size + (width, height)))


def mean_jpeg_bytes(folder_root):
  """Mean size of the files in the sub-folders of `folder_root` (one per video)."""
  sizes = [entry.stat().st_size for sub in os.scandir(folder_root) if sub.is_dir()
           for entry in os.scandir(sub.path)]
  return sum(sizes) / len(sizes)
