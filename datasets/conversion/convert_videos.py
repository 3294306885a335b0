"""Video dataset -> clip records: the work of `python -m datasets.convert_videos`.

`convert_videos(conversion)` runs one conversion (a `VideoConversion`, the tool's flags):
it writes `<split>-0000i-of-000NN` shards of chunked `tf.train.SequenceExample` records,
each with its `.index` (layout in `datasets/formats/video_records.py`), `labels.txt`,
`manifest.json` (videos, frames, every skipped video with its reason, the source
directories and each shard's videos and the SHA-256 of the shard and its index:
`shard_sources`) and, last, `dataset_info.json` (with the records' format version). With
`only_shard` the tool rewrites one shard and its index of a finished conversion instead
(`shard_rebuild`).

Videos are decoded in parallel processes (`timed_pool`), each video with a time limit
(`video_timeout`); a decoder that hangs is killed and the video skipped. The decoding
code (`video_frames`) imports no TensorFlow; the records are written here, in the parent.
Videos are shuffled once with a fixed seed and cut into contiguous shards, so every shard
mixes classes and shards finish in order. Each finished shard is renamed into place and
recorded in `progress/`; a rerun keeps finished shards and converts only the rest.

Bad input never stops the conversion (unless `strict`): an empty, truncated, unreadable
or audio-only file, a listed video that is missing, or a list line naming a class that
classInd lacks is skipped, listed in the manifest and in the summary line.
"""

import dataclasses
import json
import os
import random
import sys

from core.errors import DataError
from datasets import dataset_factory
from datasets.conversion import shard_sources, video_shards
from datasets.conversion.conversion_progress import Progress
from datasets.conversion.timed_pool import TaskFailed, TaskTimeout, run_tasks
from datasets.conversion.convert_videos_config import VideoConversion
from datasets.conversion.video_frames import VideoTask, process_video
from datasets.formats import converted_data, shards, video_records
from datasets.formats.dataset_split import DatasetError

__all__ = ['VideoConversion', 'convert_videos', 'StrictStop', 'summary_line', 'Shard',
           'video_task', 'write_shard_records']


class StrictStop(DataError):
  """--strict met a bad video: the message names it and the reason (status 3, DATA)."""

  def __init__(self, path, reason):
    super().__init__('--strict: stopped at a bad video: %s: %s' % (path, reason))


def _check(conversion):
  def require(condition, message):
    if not condition:
      raise DatasetError(message)
  video_datasets = dataset_factory.list_datasets(dataset_factory.VIDEO)
  require(conversion.dataset_name in video_datasets, '--dataset_name=%s is not a video '
          'dataset; valid: %s' % (conversion.dataset_name, ', '.join(video_datasets)))
  require(conversion.modality in video_records.MODALITIES, '--modality=%s is not known; '
          'valid: %s' % (conversion.modality, ', '.join(video_records.MODALITIES)))
  require(conversion.output_dir, '--output_dir is required')
  source = conversion.frames_dir or conversion.video_dir
  require(source, '--video_dir (or --frames_dir for extracted frames) is required')
  require(os.path.isdir(source), '%s=%s is not a directory' % (
      '--frames_dir' if conversion.frames_dir else '--video_dir', source))
  require(conversion.short_side >= 0, '--short_side=%d must be >= 0 (0 keeps the size)'
          % conversion.short_side)
  require(conversion.fps >= 0, '--fps=%g must be >= 0 (0 keeps the source rate)'
          % conversion.fps)
  for name in ('num_processes', 'num_shards'):
    require(getattr(conversion, name) >= 1, '--%s=%d must be >= 1'
            % (name, getattr(conversion, name)))
  require(1 <= conversion.jpeg_quality <= 100, '--jpeg_quality=%d must be in 1..100'
          % conversion.jpeg_quality)
  require(conversion.video_timeout > 0, '--video_timeout must be > 0 seconds')
  require(conversion.chunk_frames >= 1, '--chunk_frames=%d must be >= 1'
          % conversion.chunk_frames)
  require(conversion.num_conversion_tasks >= 1, '--num_conversion_tasks=%d must be >= 1'
          % conversion.num_conversion_tasks)
  require(0 <= _task_index(conversion) < conversion.num_conversion_tasks,
          '--conversion_task_index=%s must be in 0..%d (--num_conversion_tasks=%d; or set '
          '$JOB_COMPLETION_INDEX)' % (conversion.conversion_task_index,
                                     conversion.num_conversion_tasks - 1,
                                     conversion.num_conversion_tasks))


def _task_index(conversion):
  index = conversion.conversion_task_index
  return 0 if index is None else index


def _mine(plans, conversion):
  """The shards this task converts: every num_conversion_tasks-th of all splits' shards,
  in plan order (sorted splits, then shard index), from its index."""
  ordered = [shard for _, shards in sorted(plans.items()) for shard in shards]
  return ordered[_task_index(conversion)::conversion.num_conversion_tasks]


def _check_settings(conversion):
  """A rerun must use the same settings as the shards already there."""
  os.makedirs(os.path.join(conversion.output_dir, 'progress'), exist_ok=True)
  path = os.path.join(conversion.output_dir, 'conversion.json')
  settings = conversion.settings()
  if os.path.exists(path):
    with open(path) as handle:
      previous = json.load(handle)
    if previous != settings:
      changed = sorted(k for k in settings if previous.get(k) != settings[k])
      raise DatasetError('--output_dir=%s holds a conversion with other settings (%s); '
                         'use a new --output_dir' % (conversion.output_dir, ', '.join(changed)))
  else:
    converted_data.write_text_atomically(path, json.dumps(settings, indent=2) + '\n')


@dataclasses.dataclass
class Shard:
  """One planned shard: split, index, shard count and its VideoEntries in record order."""
  split: str
  index: int
  count: int
  entries: list

  @property
  def name(self):
    return shards.shard_name(self.split, self.index, self.count)


def _plan_shards(split_name, entries, conversion):
  """Shuffled once (fixed seed), cut into contiguous shards: class-mixed, in order."""
  entries = list(entries)
  random.Random('%d-%s' % (conversion.seed, split_name)).shuffle(entries)
  count = max(1, min(conversion.num_shards, len(entries)))
  return [Shard(split_name, i, count, entries[i * len(entries) // count:
                                               (i + 1) * len(entries) // count])
          for i in range(count)]


def _video_id(entry):
  return os.path.splitext(os.path.basename(entry.relative_path))[0]


def video_task(entry, conversion):
  """The decoding task of one listed video (`process_video` runs it in a worker)."""
  if conversion.frames_dir:
    return VideoTask(conversion.frames_dir, _video_id(entry), conversion.modality,
                     fps=conversion.fps, from_frames=True)
  return VideoTask(os.path.join(conversion.video_dir, entry.relative_path), _video_id(entry),
                   conversion.modality, conversion.short_side, conversion.fps,
                   conversion.jpeg_quality)


def _missing(entry, conversion):
  """The reason a listed video cannot even be tried, or None."""
  if conversion.frames_dir:
    return None  # Frame folders are checked by the worker (u/ and v/ for flow).
  path = os.path.join(conversion.video_dir, entry.relative_path)
  if not os.path.isfile(path):
    return 'missing: listed in the split but not found at %s' % path
  return None


def _progress_path(conversion, shard):
  return os.path.join(conversion.output_dir, 'progress', shard.name + '.json')


def _shard_done(conversion, shard):
  final = os.path.join(conversion.output_dir, shard.name)
  return all(os.path.exists(path) for path in (
      final, video_records.index_path(final), _progress_path(conversion, shard)))


def _chunked(entry, result, conversion):
  header = video_records.VideoHeader(
      modality=conversion.modality, label=entry.label, label_string=entry.class_name,
      video_id=_video_id(entry), data_path=entry.relative_path, height=result['height'],
      width=result['width'], frame_rate=result['frame_rate'])
  return video_shards.chunk_video(result['frames'], header, conversion.chunk_frames)


def write_shard_records(conversion, shard, converted):
  """Writes one shard and its index atomically from [(VideoEntry, decoded result)] in
  shard order; returns the shard's path. The single-shard rebuild (shard_rebuild) writes
  through this too, so a rebuilt shard and its index hold the same bytes."""
  videos = (_chunked(entry, result, conversion) for entry, result in converted)
  return video_shards.write_video_shard(videos, conversion.output_dir, shard.split,
                                        shard.index, shard.count)


def _finish_shard(conversion, shard, results):
  """Writes one shard (videos in shard order) with its index, and its progress record."""
  converted = [(e, results[e.relative_path]) for e in shard.entries
               if isinstance(results.get(e.relative_path), dict)]
  path = write_shard_records(conversion, shard, converted)
  summary = {
      'sha256': shard_sources.file_sha256(path),
      'index_sha256': shard_sources.file_sha256(video_records.index_path(path)),
      'videos': [{'id': _video_id(e), 'path': e.relative_path, 'label': e.label,
                  'frames': len(r['frames'])} for e, r in converted],
      'skipped': [{'path': e.relative_path, 'split': shard.split,
                   'reason': results[e.relative_path]} for e in shard.entries
                  if isinstance(results.get(e.relative_path), str)]}
  converted_data.write_text_atomically(_progress_path(conversion, shard),
                                       json.dumps(summary, indent=1) + '\n')
  return summary


def _reason(result):
  if isinstance(result, TaskTimeout):
    return 'timeout: %s' % result
  if isinstance(result, TaskFailed):
    text = str(result)
    return text[len('BadVideo: '):] if text.startswith('BadVideo: ') else text
  return None


def _run_shards(conversion, shards, results):
  """Converts every video of the pending shards; writes each shard once it is complete."""
  tasks, owners = [], []
  for shard in shards:
    for entry in shard.entries:
      if entry.relative_path not in results:
        tasks.append(video_task(entry, conversion))
        owners.append(entry)
  waiting = {shard.name: {e.relative_path for e in shard.entries} - set(results)
             for shard in shards}
  for shard in [s for s in shards if not waiting[s.name]]:
    _finish_shard(conversion, shard, results)
  progress = Progress(len(tasks), conversion.progress)
  try:
    for index, result in run_tasks(process_video, tasks, conversion.num_processes,
                                   conversion.video_timeout):
      entry = owners[index]
      bad = _reason(result)
      results[entry.relative_path] = bad if bad else result
      if bad and conversion.strict:
        raise StrictStop(entry.relative_path, bad)
      progress.update(0 if bad else len(result['frames']), skipped=bool(bad))
      for shard in shards:
        pending = waiting[shard.name]
        if entry.relative_path in pending:
          pending.discard(entry.relative_path)
          if not pending:
            _finish_shard(conversion, shard, results)
            for e in shard.entries:  # Frames are on disk now: free the memory.
              if isinstance(results.get(e.relative_path), dict):
                results[e.relative_path] = {'frames': ()}
  finally:
    progress.close()


def _split_plans(conversion, lists):
  return {split: _plan_shards(split, entries, conversion)
          for split, entries in sorted(lists.splits.items())}


def convert_videos(conversion):
  """Runs one conversion; returns the manifest dict.

  Raises:
    DatasetError (a ConfigError): a bad setting, or an output_dir holding a conversion
      with other settings; nothing converted then.
    StrictStop (a DataError): `strict` and a bad video; finished shards are kept, no
      dataset_info.json is written.
    OSError: the output could not be written.
  """
  _check(conversion)
  lists = dataset_factory.read_split_lists(
      conversion.dataset_name, conversion.splits_dir, conversion.split,
      conversion.video_dir or conversion.frames_dir, conversion.test_fraction,
      conversion.seed, conversion.group_by)
  if lists.groups is not None:  # Before the long decode: the split can be judged at once.
    print(lists.groups.line(), file=sys.stderr, flush=True)
  if conversion.strict and lists.problems:
    path, reason = lists.problems[0]
    raise StrictStop(path, reason)
  _check_settings(conversion)
  plans = _split_plans(conversion, lists)
  results = {}
  pending = []
  for shard in _mine(plans, conversion):
    if _shard_done(conversion, shard):
      continue
    for entry in shard.entries:
      reason = _missing(entry, conversion)
      if reason:
        if conversion.strict:
          raise StrictStop(entry.relative_path, reason)
        results[entry.relative_path] = reason
    pending.append(shard)
  _run_shards(conversion, pending, results)
  others = [shard.name for shards in plans.values() for shard in shards
            if not _shard_done(conversion, shard)]
  if others:  # Other tasks' shards: the last task to finish writes the final files.
    return {'pending_shards': others, 'task': _task_index(conversion),
            'num_tasks': conversion.num_conversion_tasks,
            'shards_done': len(_mine(plans, conversion))}
  return _write_final_files(conversion, lists, plans)


def _write_final_files(conversion, lists, plans):
  """manifest.json and labels.txt, then dataset_info.json last (it marks completion)."""
  manifest = {'dataset_name': conversion.dataset_name, 'split': conversion.split,
              'modality': conversion.modality, 'settings': conversion.settings(),
              'videos': {}, 'frames': {}, 'shards': {},
              'skipped': [{'path': p, 'split': None, 'reason': r} for p, r in lists.problems]}
  if lists.groups is not None:
    manifest['groups'] = dataclasses.asdict(lists.groups)
  for split, split_shards in plans.items():
    with_progress = []
    for shard in split_shards:
      with open(_progress_path(conversion, shard)) as handle:
        with_progress.append(json.load(handle))
    manifest['videos'][split] = sum(len(p['videos']) for p in with_progress)
    manifest['frames'][split] = sum(v['frames'] for p in with_progress for v in p['videos'])
    manifest['shards'][split] = len(split_shards)
    manifest['skipped'] += [s for p in with_progress for s in p['skipped']]
    shard_sources.add_shard_contents(manifest, split_shards, with_progress)
  shard_sources.add_sources(manifest, conversion)
  out = conversion.output_dir
  converted_data.write_text_atomically(os.path.join(out, 'manifest.json'),
                                       json.dumps(manifest, indent=1) + '\n')
  converted_data.write_converted_info(
      out, conversion.dataset_name, list(lists.class_names),
      video_records.MODALITIES[conversion.modality], manifest['videos'],
      modality=conversion.modality, extra={'chunk_frames': conversion.chunk_frames})
  return manifest


def summary_line(manifest, output_dir):
  if 'pending_shards' in manifest:
    return ('conversion task %d of %d: its %d shards are in %s; %d shards of other tasks '
            'remain (the last task to finish writes manifest.json and dataset_info.json)'
            % (manifest['task'], manifest['num_tasks'], manifest['shards_done'], output_dir,
               len(manifest['pending_shards'])))
  counts = ', '.join('%s %d' % (s, n) for s, n in sorted(manifest['videos'].items()))
  line = 'converted %s videos (%d frames) into %s' % (
      counts, sum(manifest['frames'].values()), output_dir)
  skipped = manifest['skipped']
  if skipped:
    shown = '; '.join('%s (%s)' % (s['path'], s['reason']) for s in skipped[:5])
    line += '; skipped %d: %s%s (all in manifest.json)' % (
        len(skipped), shown, '; ...' if len(skipped) > 5 else '')
  return line
