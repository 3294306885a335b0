r"""Writes a tiny synthetic action dataset: real video files and split lists, UCF101 layout.

    python -m datasets.make_synthetic_videos --output_dir=/tmp/synthetic_videos
    python -m datasets.make_synthetic_videos --output_dir=runs/i3d/videos --num_classes=4 \
        --videos_per_class=48 --sizes=112x144,120x160 --min_frames=8 --max_frames=48

Default: 4 classes x 12 videos of 8-40 frames; about 1 s on one CPU core and 3 MB, written
as <output_dir>/videos/<ClassName>/v_<ClassName>_gGG_cCC.avi and <output_dir>/splits/
(classInd.txt, trainlist01.txt, testlist01.txt). The classes differ only in the direction
of motion; what the videos show, and why, is in datasets/synthetic/make_synthetic_videos.py,
which does the work.

Exit status (the table in core/errors.py): 0 written; 2 bad flags or an output_dir that
already holds videos/ or splits/ (one `error:` line, nothing written); 6 the files could
not be written.
"""

from absl import app
import av

from core.errors import EXPECTED, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.synthetic import make_synthetic_videos
from datasets.synthetic.make_synthetic_videos import SyntheticVideosConfig

define_flags(SyntheticVideosConfig)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    config = config_from_flags(SyntheticVideosConfig)
    summary = make_synthetic_videos.write_synthetic_videos(config)
  except EXPECTED as error:
    return report(error)
  except (OSError, av.FFmpegError) as error:
    print_error('writing into %s failed: %s' % (config.output_dir, error))
    return IO
  print(make_synthetic_videos.summary_line(summary))
  return OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
