"""The training input's position in every checkpoint the chief writes.

A resumed run continues with the batch the run that went straight through would have
drawn next: the state of the training iterator (tf.data's own iterator checkpointing, a
saveable beside the variables) is saved with them and restored after them. The pipelines
set tf.data's symbolic checkpointing (datasets.inputs.record_files.pipeline_options), so
the state is where each reader, shuffle and random stream stands, with the shuffle
buffers' own entries (serialized records; for clips, index entries), never the decoded
batches the maps and the prefetch hold (docs/benchmarks.md gives the sizes).

The state is saved under a name that carries a fingerprint of what shapes the sequence
of batches (the input settings and the split's files): a resume with other input
settings, or from a checkpoint written before this existed, finds no state under that
name and starts a new pass, saying so in one line. Only the chief's iterator is saved:
other workers of a cluster start a new pass of their shard on every start (in the order
their seed gives), and the tf.data service's batches come from its data workers, whose
state no checkpoint holds.
"""

import hashlib

from absl import logging
from tensorflow.python.training.saving import saveable_object

from tf_compat import tf

__all__ = ['InputPosition', 'input_position', 'is_input_position', 'INPUT_POSITION']

INPUT_POSITION = 'slimdeploy_input_position'  # Graph collection of the one InputPosition.


def is_input_position(name):
  """Whether a checkpoint entry is an input position (the one entry that is no variable)."""
  return name.startswith('input_position_')


def _fingerprint(settings, split):
  text = '%r|%s' % (settings, split.file_pattern)
  return hashlib.sha256(text.encode()).hexdigest()[:12]


_IGNORE_EXTERNAL_STATE = 1  # tf.data's ExternalStatePolicy.IGNORE


class _IteratorState(saveable_object.SaveableObject):
  """An iterator's state as one string tensor in the checkpoint: tf.data's serialized
  state (a variant) turned into a TensorProto's bytes, so every reader of a checkpoint
  (NumPy included, which has no variant) reads it like any other entry.

  A stateful op of the pipeline (the input-wait clock, the damaged-clip counter) has no
  state to save: its state is ignored, the rest saved."""

  def __init__(self, iterator_resource, name):
    with tf.device(iterator_resource.device):
      state = tf.io.serialize_tensor(tf.raw_ops.SerializeIterator(
          resource_handle=iterator_resource, external_state_policy=_IGNORE_EXTERNAL_STATE))
    spec = saveable_object.SaveSpec(state, '', name, device=iterator_resource.device)
    super().__init__(iterator_resource, [spec], name)

  def restore(self, restored_tensors, restored_shapes):
    with tf.device(self.op.device):
      return tf.raw_ops.DeserializeIterator(
          resource_handle=self.op,
          serialized=tf.io.parse_tensor(restored_tensors[0], tf.variant))


class InputPosition:
  """The iterator's saveable (for the chief's saver) and its restore after a resume."""

  def __init__(self, iterator, settings, split):
    self.name = 'input_position_%s' % _fingerprint(settings, split)
    self.saveable = _IteratorState(iterator._iterator_resource,  # pylint: disable=protected-access
                                   self.name)
    self._saver = tf.train.Saver([self.saveable], name='input_position_saver')

  def restore(self, sess, checkpoint):
    """Restores the position saved in `checkpoint` (a prefix); -> whether it held one."""
    reader = tf.train.load_checkpoint(checkpoint)
    if not all(reader.has_tensor(spec.name) for spec in self.saveable.specs):
      logging.info('Input: %s holds no input position for these input settings (written '
                   'before positions were saved, or with other ones): a new pass begins',
                   checkpoint)
      return False
    self._saver.restore(sess, checkpoint)
    logging.info('Input: resumed at the position saved in %s', checkpoint)
    return True


def input_position(graph):
  """The graph's InputPosition, or None (no saved position: not the chief, the service)."""
  found = graph.get_collection(INPUT_POSITION)
  return found[0] if found else None
