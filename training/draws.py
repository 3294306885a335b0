"""The batches the clones of one step draw from the worker's iterator, in a fixed order.

Clone i of a micro-batch draws the i-th batch: each draw waits for the one before, so which
clone trains which batch does not depend on which the scheduler runs first (a seeded run
repeats, a resumed one continues, training.repeatability). With --log_example_ids the ids
the input appends to each batch are taken off here and handed to `ExampleIds`
(training.example_ids).
"""

from tf_compat import tf

__all__ = ['Draws']


class Draws:
  """The draws of one step's graph, in build order (micro-batch by micro-batch, clone by
  clone, as accumulation.deploy builds them)."""

  def __init__(self, num_clones, example_ids=None):
    self.example_ids = example_ids   # ExampleIds, or None: the batches carry no ids
    self._num_clones = num_clones
    self._last = []
    self._count = 0

  def draw(self, input_wait, iterator):
    """The next batch of `iterator` (drawn and timed by `input_wait`), after the last one
    drawn; its ids, when it carries them, are recorded and taken off."""
    with tf.control_dependencies(self._last):
      batch = input_wait.draw(iterator)
    self._last = [tf.nest.flatten(batch)[0]]
    if self.example_ids is not None:
      batch, ids = batch[:-1], batch[-1]
      self.example_ids.add(ids, self._count % self._num_clones,
                           self._count // self._num_clones)
    self._count += 1
    return batch
