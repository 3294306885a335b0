r"""Builds an I3D checkpoint from a 2-D Inception-v1 one ("inflation", the I in I3D).

    python -m nets.inflate --checkpoint_2d=inception_v1.ckpt --output=DIR/i3d_inflated.ckpt

The 2-D checkpoint must carry tf_slim.nets.inception_v1's names, as slim's ImageNet
Inception-v1 checkpoint does. Each 2-D kernel is repeated along time and divided by its
temporal size; batch norm betas and statistics are copied; the 2-D logits only with
--num_classes=1001. The output is a TF checkpoint prefix with our I3D names, restorable
directly by the training code; a failure leaves no half-written checkpoint. The work, and
what inflation preserves, is in nets/inflation.py.

Exit status (the table in core/errors.py): 0 written; 2 bad flags, a checkpoint that is
not a 2-D Inception-v1 or an output prefix that already holds a checkpoint (one `error:`
line on stderr); 6 the output could not be written.
"""

from absl import app

from core.errors import EXPECTED, IO, OK, USAGE, print_error, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from nets import inflation
from nets.inflation import InflateConfig
from tf_compat import tf

define_flags(InflateConfig)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    written = inflation.inflate_checkpoint(config_from_flags(InflateConfig))
  except EXPECTED as error:
    return report(error)
  except (OSError, tf.errors.OpError) as error:
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    print_error('writing the I3D checkpoint failed: %s' % message)
    return IO
  print(inflation.summary_line(written))
  return OK


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
