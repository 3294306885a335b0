"""`StarvedInput`: a training input made slow on purpose, for the input-wait and doctor
tests' built-in contrast.

It wraps the real input of any kind and sleeps `seconds` per batch in a py_function
(which holds no core) as the batch is drawn, so the model waits for its data whatever
the machine's load.
"""

import time

from datasets.inputs import input_factory
from tf_compat import tf


class StarvedInput:
  """The real input (`datasets.inputs.input_factory`) with a sleep per batch."""

  def __init__(self, real, seconds):
    self.real = real
    self.kind = real.kind
    self.seconds = seconds

  def skip_counter(self, limit):
    return self.real.skip_counter(limit)

  def dataset(self, split, settings, skips=None):
    def starve(*batch):
      slept = tf.py_function(lambda: time.sleep(self.seconds) or 0, [], tf.int32)
      with tf.control_dependencies([slept]):
        return tuple(tf.identity(tensor) for tensor in batch)
    return self.real.dataset(split, settings, skips).map(starve)

  def finish(self, batch, split):
    return self.real.finish(batch, split)

  def summarize(self, inputs, labels, split, settings):
    return self.real.summarize(inputs, labels, split, settings)

  def describe(self, settings, split):
    return 'starved ' + self.real.describe(settings, split)


def starve_training(monkeypatch, kind, seconds):
  """train() reads its input of `kind` through a StarvedInput for the rest of the test."""
  registry = dict(input_factory._REGISTRY)  # pylint: disable=protected-access
  registry[kind] = StarvedInput(registry[kind], seconds)
  monkeypatch.setattr(input_factory, '_REGISTRY', registry)
