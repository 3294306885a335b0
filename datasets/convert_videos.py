r"""Converts a video dataset into clip records: `python -m datasets.convert_videos`.

    python -m datasets.convert_videos --dataset_name=ucf101 --video_dir=UCF-101 \
        --splits_dir=ucfTrainTestlist --split=1 --output_dir=/data/ucf101_rgb_s1 \
        --modality=rgb --num_processes=8
    python -m datasets.convert_videos --dataset_name=ucf101 --frames_dir=tvl1_flow \
        --splits_dir=ucfTrainTestlist --modality=flow --output_dir=/data/ucf101_flow_s1

Writes `<split>-0000i-of-000NN` shards of `tf.train.SequenceExample` records, each video
as records of `--chunk_frames` frames, with an index beside each shard (layout in
`datasets/formats/video_records.py`), `labels.txt`, `manifest.json` (videos, frames and every
skipped video with its reason) and, last, `dataset_info.json`. For the field's whole-video
layout, export afterwards: `python -m datasets.export_media_sequence --dataset_dir=D
--output_dir=E`.

Videos are decoded in `--num_processes` parallel processes, each video with a time limit
(`--video_timeout`); a decoder that hangs is killed and the video skipped. A rerun into
the same `--output_dir` keeps finished shards and converts only the rest. Bad input
never stops the conversion (unless `--strict`): an empty, truncated, unreadable or
audio-only file, a listed video that is missing, or a list line naming a class that
classInd lacks is skipped, listed in the manifest and in one summary line. The work is
in datasets/conversion/convert_videos.py.

One damaged shard (named by the trainer's, eval.py's or datasets.verify_records' error
line) is rewritten alone, byte for byte, from the sources and settings manifest.json
records (datasets/conversion/shard_rebuild.py):

    python -m datasets.convert_videos --output_dir=/data/ucf101_rgb_s1 \
        --only_shard=train-00003-of-00010 [--video_dir=<where the videos are now>]

Across machines: N tasks (pods, hosts) sharing one --output_dir each run the same
command with --num_conversion_tasks=N and --conversion_task_index=k (or, in a Kubernetes
Indexed Job, nothing: $JOB_COMPLETION_INDEX is the index; configs/k8s/ has the manifest).
Task k converts shards k, k + N, ... of the same plan, so the records are those one task
writes; the last task to finish writes manifest.json and dataset_info.json.

Exit status (the table in core/errors.py): 0 every listed video converted (or, with
several tasks, this task's shards written; or --only_shard's shard rewritten); 4 conversion
complete but some videos skipped (see manifest.json); 3 stopped by --strict at the first
bad video (finished shards kept, no dataset_info.json), or a video --only_shard needs no
longer converts (the shard is left as it was); 2 bad flags; 6 the output could not be
written.
"""

import os

from absl import app

from core.errors import EXPECTED, INCOMPLETE, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.conversion.convert_videos_config import (VideoConversion,
                                                         with_task_from_environment)

define_flags(VideoConversion)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  # Imported here, not at the top: every decoding process starts by importing this module
  # again (multiprocessing's spawn), and the work module imports TensorFlow, which cost
  # 5.3 s per process (tests/datasets/test_convert_videos.py checks they do without).
  from datasets.conversion import convert_videos  # pylint: disable=import-outside-toplevel
  from datasets.conversion import shard_rebuild  # pylint: disable=import-outside-toplevel
  try:
    config = with_task_from_environment(config_from_flags(VideoConversion), os.environ)
    if config.only_shard:
      print(shard_rebuild.summary_line(shard_rebuild.rebuild_shard(config)))
      return OK
    manifest = convert_videos.convert_videos(config)
  except EXPECTED as error:
    return report(error)
  except OSError as error:
    print_error('conversion into %s failed: %s' % (config.output_dir, error))
    return IO
  print(convert_videos.summary_line(manifest, config.output_dir))
  return INCOMPLETE if manifest.get('skipped') else OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
