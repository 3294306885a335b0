"""Small files written whole: a reader sees the old content or the new, never half.

Used for every marker, manifest and record file the project writes (converted data's
dataset_info.json and manifest, the trainer's end marker and flags.cfg).
"""

import os
import uuid

from tf_compat import tf

__all__ = ['write_text_atomically']


def write_text_atomically(path, text):
  """Writes `text` to a temporary name beside `path` (`.<name>.tmp-<random>`), then
  renames it over `path`; the temporary file is removed if anything fails."""
  temporary = os.path.join(os.path.dirname(path) or '.', '.%s.tmp-%s'
                           % (os.path.basename(path), uuid.uuid4().hex[:12]))
  try:
    with tf.io.gfile.GFile(temporary, 'w') as handle:
      handle.write(text)
    tf.io.gfile.rename(temporary, path, overwrite=True)
  except BaseException:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)
    raise
