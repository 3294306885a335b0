"""Where checkpoints are: a path given by the user (file, prefix or directory), the
checkpoints a training directory lists, whether one is completely written, its step.

Which checkpoints exist comes from the `checkpoint` state file, which tf.train.Saver
rewrites (atomically) only after a checkpoint's data and index files are in place.
"""

import os
import re

from core.params import ConfigError
from tf_compat import tf

__all__ = ['resolve_checkpoint', 'latest_checkpoint', 'checkpoint_step', 'global_step_of',
           'is_complete', 'listed_checkpoints']

_CHECKPOINT_FILE_SUFFIX = re.compile(r'\.(index|meta|data-\d{5}-of-\d{5})$')
_STEP = re.compile(r'-(\d+)$')


def resolve_checkpoint(path, flag='checkpoint_path'):
  """A checkpoint prefix for a prefix, one of its files, or a directory (its latest)."""
  if tf.gfile.IsDirectory(path):
    latest = tf.train.latest_checkpoint(path)
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


def latest_checkpoint(train_dir):
  """The latest checkpoint in train_dir, or None (a resume skips fine-tune restore)."""
  if train_dir and os.path.isdir(train_dir):
    return tf.train.latest_checkpoint(train_dir)
  return None


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
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except (tf.errors.OpError, ValueError):  # State file being replaced, or unparsable.
    return []
  if state is None:
    return []
  paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
  if state.model_checkpoint_path and state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  paths = [p if os.path.isabs(p) else os.path.join(train_dir, p) for p in paths if p]
  return sorted(paths, key=lambda p: (checkpoint_step(p) is None, checkpoint_step(p) or 0))
