r"""Converts an image dataset into sharded image records, labels.txt and dataset_info.json.

    python -m datasets.convert_images --dataset_name=digits --output_dir=/tmp/digits
    python -m datasets.convert_images --dataset_name=image_folder --image_dir=photos \
        --output_dir=/tmp/photos --test_fraction=0.2 --seed=0

digits takes a few seconds on one CPU core. Re-running over a finished output replaces it.
image_folder files that are not readable images are skipped and listed on stderr. The
work is in datasets/conversion/convert_images.py.

Exit status (the table in core/errors.py): 0 converted; 4 converted, but files were
skipped (listed on stderr), as convert_videos does for skipped videos; 2 bad flags (one `error:` line,
nothing written); 6 the output could not be written (no shard is left half-written, and
dataset_info.json is absent until a run completes).
"""

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app

from core.errors import EXPECTED, INCOMPLETE, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.conversion import convert_images
from datasets.conversion.convert_images import ImageConversion
from tf_compat import tf

define_flags(ImageConversion)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    config = config_from_flags(ImageConversion)
    result = convert_images.convert_images(config)
  except EXPECTED as error:
    return report(error)
  except (OSError, tf.errors.OpError) as error:
    # Disk full, permission denied, a file gone between passes: the environment, not a bug.
    print_error('conversion into %s failed: %s' % (config.output_dir, error))
    return IO
  convert_images.print_summary(result)
  return INCOMPLETE if result.skipped else OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
