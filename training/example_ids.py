"""--log_example_ids: which examples each step trained, in `example_ids.tsv` of train_dir.

    global_step  clone  micro_batch  example_id
    17           1      0            record 12 of /data/digits/digits_train-00001-of-00002

One line per example of every batch a step drew, written by the chief inside the step
(a NumPy function that takes the batches' ids, run once the update is done), so a line
names the global step that update made. Examples are images' 'record N of
<shard>' or clips' video ids. A step that ran again after a resume (the run stopped after
it, before its checkpoint) is written again: the last lines of a step are what its
checkpointed update trained (`read_example_ids` keeps those). Counting what an epoch
trained, or what a resume trained again, reads this file.
"""

import collections
import os

from tf_compat import tf

__all__ = ['EXAMPLE_IDS_FILE', 'ExampleIds', 'read_example_ids']

EXAMPLE_IDS_FILE = 'example_ids.tsv'


class ExampleIds:
  """The ids of the batches drawn in one step's graph, and the op that writes them."""

  def __init__(self, train_dir):
    self._path = os.path.join(train_dir, EXAMPLE_IDS_FILE)
    self._batches = []   # (clone, micro_batch, ids string [batch])

  def add(self, ids, clone, micro_batch):
    self._batches.append((clone, micro_batch, ids))

  def wrap(self, train_op, global_step):
    """`train_op` that also appends this step's lines (nothing to add: train_op)."""
    if not self._batches:
      return train_op
    places = [(clone, micro_batch) for clone, micro_batch, _ in self._batches]
    path = self._path

    def write(step, *batches):
      with open(path, 'a') as stream:
        for (clone, micro_batch), ids in zip(places, batches):
          for example in ids:
            stream.write('%d\t%d\t%d\t%s\n' % (step, clone, micro_batch,
                                               example.decode('utf-8', 'replace')))
      return step

    with tf.control_dependencies([train_op]):  # The global step this update made.
      step = global_step.read_value()
    written = tf.numpy_function(write, [step] + [ids for _, _, ids in self._batches],
                                step.dtype, stateful=True, name='write_example_ids')
    with tf.control_dependencies([written]):
      return tf.identity(train_op, name='train_op_with_example_ids')


def read_example_ids(train_dir):
  """{global step: [(clone, micro_batch, example id)]} of example_ids.tsv; a step written
  more than once (run again after a resume) keeps its last lines."""
  steps = collections.OrderedDict()
  last = None
  with open(os.path.join(train_dir, EXAMPLE_IDS_FILE)) as stream:
    for line in stream:
      step, clone, micro_batch, example = line.rstrip('\n').split('\t', 3)
      step = int(step)
      if step != last:  # A new run of this step replaces what an earlier one wrote.
        steps[step] = []
        last = step
      steps[step].append((int(clone), int(micro_batch), example))
  return dict(steps)
