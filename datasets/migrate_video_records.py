r"""Migrates older video records to today's layout: `python -m datasets.migrate_video_records`.

    python -m datasets.migrate_video_records --dataset_dir=/data/ucf101_rgb_s1 \
        --output_dir=/data/ucf101_rgb_s1_v2

Video records of format 1 (one record per whole video; their dataset_info.json has no
"format_version") are refused by training, eval and export with one line naming this
command. It writes the same videos, frames byte for byte, as chunked records with an index
per shard (format 2, datasets/formats/video_records.py) into --output_dir, a new directory; the
old one is only read and can be removed afterwards. Each shard is written atomically and
dataset_info.json last, so an interrupted run leaves no half dataset; the same command
resumes it, keeping the shards already done. The work is in
datasets/conversion/migrate_video_records.py.

Exit status (the table in core/errors.py): 0 migrated; 2 bad flags, or data that needs no
migration; 3 a shard of --dataset_dir cannot be read (the line names it; shards done are
kept); 6 the output could not be written.
"""

from absl import app

from core.errors import EXPECTED, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.conversion import migrate_video_records
from datasets.conversion.migrate_video_records import RecordMigration

define_flags(RecordMigration)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    config = config_from_flags(RecordMigration)
    summary = migrate_video_records.migrate_video_records(config)
  except EXPECTED as error:
    return report(error)
  except OSError as error:
    print_error('migration into %s failed: %s' % (config.output_dir, error))
    return IO
  print(migrate_video_records.summary_line(summary))
  return OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
