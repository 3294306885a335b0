"""The trainer's end marker: `<train_dir>/training_done.json`, written once training ends.

    {"status": "finished", "global_step": 1000, "checkpoint": "model.ckpt-1000",
     "time": "2026-11-24T23:30:00Z"}

The chief (or the only process) writes it atomically after its last checkpoint, with
status `finished` (the step limit was reached) or `stopped` (SIGTERM, SIGINT, preemption;
such a run is usually restarted), and removes an old one when it starts. The checkpoint is
a basename inside train_dir, so a copied or moved train_dir still names its own file.

`eval.py --watch` reads it (`checkpoints.watch`): after a finished marker it ends once the
named step is evaluated; after a stopped one it logs the stop and keeps watching until
--watch_timeout, in case the run resumes.
"""

import dataclasses
import datetime
import json
import os
from core.files import write_text_atomically
from tf_compat import tf

__all__ = ['END_MARKER_FILE', 'FINISHED', 'STOPPED', 'EndMarker', 'write_end_marker',
           'read_end_marker', 'clear_end_marker']

END_MARKER_FILE = 'training_done.json'
FINISHED, STOPPED = 'finished', 'stopped'


@dataclasses.dataclass(frozen=True)
class EndMarker:
  status: str            # FINISHED or STOPPED
  global_step: int
  checkpoint: str        # basename of the last checkpoint in train_dir, '' if none


def write_end_marker(train_dir, status, global_step, checkpoint=None):
  """Writes the marker atomically (a temporary name, then a rename over the old one)."""
  if status not in (FINISHED, STOPPED):
    raise ValueError('status %r is not %s or %s' % (status, FINISHED, STOPPED))
  record = {'status': status, 'global_step': int(global_step),
            'checkpoint': os.path.basename(checkpoint) if checkpoint else '',
            'time': datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%dT%H:%M:%SZ')}
  path = os.path.join(train_dir, END_MARKER_FILE)
  write_text_atomically(path, json.dumps(record) + '\n')
  return path


def read_end_marker(train_dir):
  """The EndMarker in `train_dir`, or None (absent, or not a marker this module wrote).

  A marker of the first version (`{"global_step": N}` only) reads as finished."""
  try:
    with tf.io.gfile.GFile(os.path.join(train_dir, END_MARKER_FILE)) as handle:
      record = json.load(handle)
    status = record.get('status', FINISHED)
    if status not in (FINISHED, STOPPED):
      return None
    return EndMarker(status, int(record['global_step']), str(record.get('checkpoint', '')))
  except (tf.errors.NotFoundError, ValueError, KeyError, TypeError, AttributeError):
    return None


def clear_end_marker(train_dir):
  """Removes the marker of an earlier run (the chief, when training starts)."""
  path = os.path.join(train_dir, END_MARKER_FILE)
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)
