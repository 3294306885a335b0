r"""Exports video records in the field's layout: `python -m datasets.export_media_sequence`.

    python -m datasets.export_media_sequence --dataset_dir=/data/ucf101_rgb_s1 \
        --output_dir=/data/ucf101_rgb_s1_mediasequence

Writes one `tf.train.SequenceExample` per video with MediaPipe MediaSequence's keys, which
DMVR's readers take too: `image/encoded` (the stored JPEGs, unchanged) for rgb,
`FORWARD_FLOW/image/encoded` (R = u, G = v, B = 0, quantised from [-20, 20] as
MediaPipe's flow graph does) for flow, `clip/label/index`, `clip/label/string` and
`clip/label/text`, `example/id`, frame timestamps. Shards keep the source's names, one per
source shard; labels.txt comes along. The full key list is in
datasets/conversion/export_media_sequence.py, which does the work.

Exit status (the table in core/errors.py): 0 exported; 2 bad flags; 3 records that need
migrating first, or a shard or index that cannot be read (one line naming it and the
command that rebuilds that shard); 6 the output could not be written.
"""

from absl import app

from core.errors import EXPECTED, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.conversion import export_media_sequence
from datasets.conversion.export_media_sequence import MediaSequenceExport

define_flags(MediaSequenceExport)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    config = config_from_flags(MediaSequenceExport)
    summary = export_media_sequence.export_media_sequence(config)
  except EXPECTED as error:
    return report(error)
  except OSError as error:
    print_error('export into %s failed: %s' % (config.output_dir, error))
    return IO
  print(export_media_sequence.summary_line(summary))
  return OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
