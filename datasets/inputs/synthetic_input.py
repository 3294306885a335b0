"""An input that yields one batch of zeros forever, shaped like another input's batches.

    synthetic = SyntheticInput(input_factory.get_input(split.kind))
    dataset = synthetic.dataset(split, settings)   # zeros, the real batches' structure

It has the steps of an input (`input_factory`), so the trainer's graph builds on it
unchanged: each clone draws its batch from the iterator on the input device and `finish`
runs on the clone as in training (clips are still cast, scaled and mirrored there). Only
the pipeline's work is gone: no file read, decode or preprocessing. The zeros are made
once, when the iterator starts, and every `get_next` hands out the same tensor, so timing
a step on it times the model (what `python -m training.doctor` calls the model step on
synthetic data). Values do not change the cost of dense ops; the labels are class 0.

It is not registered: the registry holds one input per kind of data, the real one.
"""

from tf_compat import tf

__all__ = ['SyntheticInput']


class SyntheticInput:
  """Zeros shaped like `real`'s batches; `finish`, `summarize` and `describe` are
  `real`'s."""

  def __init__(self, real):
    self.real = real
    self.kind = real.kind

  def skip_counter(self, limit):  # pylint: disable=unused-argument
    """None: zeros never fail to decode."""
    return None

  def dataset(self, split, settings, skips=None):  # pylint: disable=unused-argument
    """A dataset repeating one batch of zeros of the real dataset's element structure.

    The real dataset is built (not read) for its element spec: every dimension must be
    static, which the inputs' drop_remainder batching gives.
    """
    spec = self.real.dataset(split, settings).element_spec
    for tensor_spec in tf.nest.flatten(spec):
      if not tensor_spec.shape.is_fully_defined():
        raise ValueError('SyntheticInput needs static batch shapes; %s yields %s'
                         % (type(self.real).__name__, tensor_spec))
    zeros = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
    return tf.data.Dataset.from_tensors(zeros).repeat()

  def finish(self, batch, split):
    return self.real.finish(batch, split)

  def summarize(self, inputs, labels, split, settings):
    return self.real.summarize(inputs, labels, split, settings)

  def describe(self, settings, split):
    return 'synthetic zeros shaped as ' + self.real.describe(settings, split)
