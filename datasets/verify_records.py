r"""Checks a converted dataset's shards and frames, and lists what is damaged.

    python -m datasets.verify_records --dataset_dir=/data/ucf101_rgb_s1
    python -m datasets.verify_records --dataset_dir=/data/digits --splits=test --nodecode

For every shard of every split (or of --splits): each record's framing and CRCs, that it
parses, that every frame (or image) decodes, and that the shard holds the records the
conversion wrote (manifest.json's list of its videos; for images the share of the split
that shard i of N holds). Prints, for each damaged or missing shard, one line saying what
is wrong (the record, the video, the frames) and one with the command that rebuilds just
that shard (`python -m datasets.convert_videos --output_dir=DIR --only_shard=NAME` for
video conversions; image conversions are run again whole), then a summary line. Decoding
is what costs: about the frames' decode time of one training epoch, spread over
--num_parallel_calls threads. The work is in datasets/checks/verify_records.py.

Exit status (the table in core/errors.py): 0 every record reads and decodes; 3 a shard is
damaged or missing (listed); 2 bad flags or no converted dataset at --dataset_dir.
"""

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app

from core.errors import DATA, EXPECTED, OK, USAGE, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.checks import verify_records
from datasets.checks.verify_records import VerifyConfig

define_flags(VerifyConfig)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    result = verify_records.verify_dataset(config_from_flags(VerifyConfig))
  except EXPECTED as error:
    return report(error)
  for line in verify_records.report_lines(result):
    print(line, flush=True)
  return DATA if result.damaged or result.missing else OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
