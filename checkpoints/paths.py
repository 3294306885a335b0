"""Where checkpoints are: a path given by the user (file, prefix or directory), the
checkpoints a training directory lists, whether one is completely written, its step.

Which checkpoints exist comes from the `checkpoint` state file, which tf.train.Saver
rewrites (atomically) only after a checkpoint's data and index files are in place.

A training directory can be moved or copied: a listed checkpoint is always looked up by
its basename inside the directory that holds the state file, never at the absolute path
an older run wrote (which, for a copy, is the original's), and the trainer writes the state
with relative paths (`make_state_relative` rewrites an older directory's once, at start).
"""

import os
import re

from google.protobuf import text_format
from tensorflow.python.training import checkpoint_state_pb2

from core.params import ConfigError
from tf_compat import tf

__all__ = ['resolve_checkpoint', 'latest_checkpoint', 'checkpoint_step', 'global_step_of',
           'is_complete', 'listed_checkpoints', 'make_state_relative']

_CHECKPOINT_FILE_SUFFIX = re.compile(r'\.(index|meta|data-\d{5}-of-\d{5})$')
_STEP = re.compile(r'-(\d+)$')


def resolve_checkpoint(path, flag='checkpoint_path'):
  """A checkpoint prefix for a prefix, one of its files, or a directory (its latest)."""
  if tf.gfile.IsDirectory(path):
    latest = latest_checkpoint(path)
    if latest is None:
      raise ConfigError('--%s=%s: the directory holds no checkpoint (expected a '
                        '"checkpoint" file from a training run)' % (flag, path))
    return latest
  prefix = _CHECKPOINT_FILE_SUFFIX.sub('', path)
  if tf.gfile.Exists(prefix + '.index'):
    return prefix
  if tf.gfile.Exists(path) and prefix == path:
    return path  # A TF1 V1 checkpoint is a single file.
  raise ConfigError('--%s=%s: no such checkpoint (give a checkpoint prefix such as '
                    'model.ckpt-1000, or a directory holding checkpoints)' % (flag, path))


def _state(train_dir):
  try:
    return tf.train.get_checkpoint_state(train_dir)
  except (tf.errors.OpError, ValueError):  # State file being replaced, or unparsable.
    return None


def _written_state(train_dir):
  """The state file as written (tf.train.get_checkpoint_state joins relative paths with
  the directory, so every path it returns looks absolute), or None."""
  path = os.path.join(train_dir, 'checkpoint')
  try:
    with tf.io.gfile.GFile(path, 'r') as handle:
      return text_format.Parse(handle.read(), checkpoint_state_pb2.CheckpointState())
  except (tf.errors.OpError, text_format.ParseError):  # None yet, being replaced, unparsable.
    return None


def _inside(train_dir, path):
  """A listed path, looked up by its basename inside train_dir."""
  return os.path.join(train_dir, os.path.basename(path.rstrip('/')))


def latest_checkpoint(train_dir):
  """The latest checkpoint in train_dir (by basename inside it, whatever path the state
  file holds), or None when there is none or its index is missing."""
  if not (train_dir and tf.io.gfile.isdir(train_dir)):
    return None
  state = _state(train_dir)
  if state is None or not state.model_checkpoint_path:
    return None
  prefix = _inside(train_dir, state.model_checkpoint_path)
  return prefix if tf.io.gfile.exists(prefix + '.index') else None


def make_state_relative(train_dir):
  """Rewrites train_dir's state file with basenames (atomically) when it holds other
  paths: TensorFlow's own readers (a resuming Supervisor) then find this directory's files,
  not those of the place an older run was written in. Returns True if it rewrote it."""
  state = _written_state(train_dir)
  if state is None:
    return False
  listed = list(state.all_model_checkpoint_paths)
  if all(p == os.path.basename(p) for p in listed + [state.model_checkpoint_path]):
    return False
  tf.train.update_checkpoint_state(
      train_dir, os.path.basename(state.model_checkpoint_path),
      [os.path.basename(p) for p in listed],
      all_model_checkpoint_timestamps=list(state.all_model_checkpoint_timestamps) or None,
      last_preserved_timestamp=state.last_preserved_timestamp or None)
  return True


def checkpoint_step(prefix):
  """The global step in a checkpoint prefix `.../model.ckpt-N`, or None."""
  match = _STEP.search(prefix)
  return int(match.group(1)) if match else None


def global_step_of(reader, prefix):
  """The checkpoint's global_step tensor, else the -N of its name, else 0."""
  if reader.has_tensor('global_step'):
    return int(reader.get_tensor('global_step'))
  return checkpoint_step(prefix) or 0


def is_complete(prefix):
  """True when the index and every data shard of checkpoint `prefix` exist and read."""
  index = prefix + '.index'
  if not tf.io.gfile.exists(index):
    return False
  shards = tf.io.gfile.glob(prefix + '.data-?????-of-?????')
  if not shards:
    return False
  count = int(shards[0].rsplit('-of-', 1)[1])
  if len(shards) != count:
    return False
  try:
    tf.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, ValueError):  # Truncated or still being renamed into place.
    return False
  return True


def listed_checkpoints(train_dir):
  """Checkpoint prefixes the state file lists, oldest first; [] before the first save."""
  state = _state(train_dir)
  if state is None:
    return []
  paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
  if state.model_checkpoint_path and state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  paths = [_inside(train_dir, p) for p in paths if p]
  return sorted(paths, key=lambda p: (checkpoint_step(p) is None, checkpoint_step(p) or 0))
