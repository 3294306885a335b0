"""A checkpoint that exists and holds no model, for tests of the config rules checked after
the checkpoint path (eval resolves --checkpoint_path first, evaluation.setup)."""

import numpy as np

from tf_compat import tf


def placeholder_checkpoint(directory):
  """Saves one float variable as `<directory>/model.ckpt-1`; returns that prefix."""
  with tf.Graph().as_default():
    variable = tf.Variable(np.zeros(1, np.float32), name='placeholder')
    with tf.Session() as session:
      session.run(variable.initializer)
      return tf.train.Saver([variable]).save(session, str(directory / 'model.ckpt-1'),
                                             write_meta_graph=False)
