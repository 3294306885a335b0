"""The input benchmark's data: synthetic UCF-like videos, their clip records (the
converter's warm-up run) and the train records' JPEGs again as a frame-folder tree
`jpegs_256/<video_id>/frame000001.jpg`, so every clip measurement decodes the same JPEGs.
"""

import os
import time

from benchmarks.input_pipeline import baselines, converter, tf_module


def prepare(settings, work_dir):
  """Videos, records and the frame-folder tree under `work_dir`.

  Returns a dict: video_dir, splits_dir, records_dir, folder_dir, train (list of
  (video_id, num_frames, label)), frame_paths (every train frame file), sizes
  (data_path -> (height, width) of the stored frames), videos and frames (all splits).
  """
  # pylint: disable-next=import-outside-toplevel
  from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
  start = time.perf_counter()
  made = make_synthetic_videos(
      os.path.join(work_dir, 'source'), num_classes=settings.num_classes,
      videos_per_class=settings.videos_per_class, min_frames=settings.min_frames,
      max_frames=settings.max_frames, sizes=(settings.video_shape,), fps=25, seed=0)
  print('# generated %d videos in %.1f s' % (len(made['videos']), time.perf_counter() - start),
        flush=True)
  data = {'video_dir': made['video_dir'], 'splits_dir': made['split_dir'],
          'records_dir': os.path.join(work_dir, 'records'),
          'folder_dir': os.path.join(work_dir, 'jpegs_256')}
  warmup = converter.convert(data, data['records_dir'], short_side=settings.short_side,
                             num_processes=settings.num_processes)  # Also the converter's warm-up.
  print('# converted them in %.1f s (warm-up, not counted)' % warmup['seconds'], flush=True)
  data['videos'], data['frames'] = warmup['videos'], warmup['frames']
  data.update(write_frame_folders(data['records_dir'], data['folder_dir']))
  return data


def write_frame_folders(records_dir, folder_dir):
  """Writes the train records' JPEGs as <folder_dir>/<video_id>/frameNNNNNN.jpg.

  Returns a dict: train (list of (video_id, num_frames, label)), frame_paths (the files
  written) and sizes (data_path -> (height, width) of every split's stored frames).
  """
  tf = tf_module()
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from datasets.conversion import video_shards  # pylint: disable=import-outside-toplevel
  train, frame_paths, sizes = [], [], {}
  for split_name in ('train', 'test'):
    split = dataset_factory.get_dataset('video_folder', split_name, records_dir)
    for path in sorted(tf.io.gfile.glob(split.file_pattern)):
      for entry, chunks in video_shards.read_video_shard(path):
        examples = [tf.train.SequenceExample.FromString(chunk) for chunk in chunks]
        context = examples[0].context.feature
        data_path = context['clip/data_path'].bytes_list.value[0].decode()
        sizes[data_path] = (context['image/height'].int64_list.value[0],
                            context['image/width'].int64_list.value[0])
        if split_name != 'train':
          continue
        jpegs = [f.bytes_list.value[0] for example in examples
                 for f in example.feature_lists.feature_list['image/encoded'].feature]
        os.makedirs(os.path.join(folder_dir, entry['video_id']))
        for index, jpeg in enumerate(jpegs, 1):
          frame_path = os.path.join(folder_dir, entry['video_id'], baselines.FRAME_FILE % index)
          with open(frame_path, 'wb') as handle:
            handle.write(jpeg)
          frame_paths.append(frame_path)
        train.append((entry['video_id'], len(jpegs), entry['label']))
  return {'train': train, 'frame_paths': frame_paths, 'sizes': sizes}
