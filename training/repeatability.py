"""A run you can repeat: --random_seed, --deterministic and what the start-up log says.

One seed, given once, reaches everything random: the graph's seed (initial weights: every
op seed TensorFlow derives from it), dropout's masks (drawn from the seed and the global
step, nets.dropout, so a resumed run draws the straight run's) and the input's (file order, shuffles,
crops, flips, clip starts: `InputSettings.seed`). Each is derived from --random_seed, the
purpose and the worker's task (`derived_seed`), so the workers of a cluster draw different
data and a seed means the same run on every machine and Python version. --deterministic
adds TensorFlow's op determinism: kernels that could sum in another order each run
(oneDNN's and Eigen's threads, tf.data's parallel maps) use one order, so two runs end
bitwise equal; without it, two seeded runs agree to rounding (docs/deployment.md, "A run
you can repeat and resume", gives the bound measured). Unset, nothing is seeded, as before.
"""

import contextlib
import hashlib

from absl import logging
from tensorflow.python.framework import config as tf_config  # Op determinism off again.

from core.errors import ConfigError, require
from nets import dropout
from tf_compat import tf

__all__ = ['derived_seed', 'check_repeatability', 'graph_seed', 'input_seed',
           'seed_dropout', 'determinism', 'describe', 'naming_nondeterministic_ops']

SEED_LIMIT = 2 ** 31  # TensorFlow's seeds are int64; tf.data's and NumPy's take 31 bits.


def derived_seed(seed, purpose, task=0):
  """A seed in [0, 2**31) for `purpose` ('graph', 'input') of worker `task`, from the
  run's seed: the same on every machine (SHA-256, not Python's salted hash)."""
  digest = hashlib.sha256(('%d/%s/%d' % (seed, purpose, task)).encode()).digest()
  return int.from_bytes(digest[:8], 'big') % SEED_LIMIT


def check_repeatability(config):
  """--random_seed in range; --deterministic only with a seed. Raises ConfigError."""
  seed = config.random_seed
  require(seed is None or 0 <= seed < SEED_LIMIT, '--random_seed=%s must be in [0, 2**31)'
          % seed)
  require(not config.deterministic or seed is not None, '--deterministic needs '
          '--random_seed (determinism makes every kernel repeat itself; the seed makes the '
          'initial weights and the input repeat): add --random_seed=N')


def graph_seed(config):
  """The graph-level seed of this worker, or None (unseeded)."""
  if config.random_seed is None:
    return None
  return derived_seed(config.random_seed, 'graph', config.task)


def input_seed(config):
  """InputSettings.seed of this worker, or None (unseeded)."""
  if config.random_seed is None:
    return None
  return derived_seed(config.random_seed, 'input', config.task)


def seed_dropout(config, global_step):
  """With --random_seed, the network's dropout masks are drawn from the seed and the
  global step (nets.dropout), so a resumed run draws the masks of the straight one."""
  if config.random_seed is None:
    return
  with tf.device(global_step.device), tf.name_scope('dropout_step_seed'):
    dropout.set_step_seed(tf.stack([
        tf.constant(derived_seed(config.random_seed, 'dropout', config.task), tf.int64),
        tf.cast(global_step.read_value(), tf.int64)]))


@contextlib.contextmanager
def determinism(config):
  """--deterministic: TensorFlow's op determinism while the run lasts. It is a
  process-wide switch (graph-mode sessions and tf.data read it too), so what was set
  before is set again after: a program that trains twice, a test, keeps its own."""
  if not config.deterministic:
    yield
    return
  before = tf_config.is_op_determinism_enabled()
  tf_config.enable_op_determinism()
  try:
    yield
  finally:
    if not before:
      tf_config.disable_op_determinism()


def describe(config, service):
  """The start-up line saying whether this run repeats, and to what bound."""
  if config.random_seed is None:
    return ('Repeatable: no (no --random_seed: initial weights, input order and '
            'augmentation differ from run to run)')
  how = ('bitwise (--deterministic: every kernel sums in one order)' if config.deterministic
         else 'to rounding: parallel kernels may sum in another order each run (add '
         '--deterministic for bitwise)')
  line = 'Repeatable: --random_seed=%d, %s' % (config.random_seed, how)
  if service is not None:
    line += ('; the tf.data service\'s data workers hand out batches in the order they '
             'finish them, so the order of examples is not repeated, and a resume joins '
             'the dispatcher\'s current epoch (no checkpoint holds the workers\' position)')
  elif not config.save_input_position:
    line += '; --nosave_input_position: a resume starts a new pass over the data'
  return line


@contextlib.contextmanager
def naming_nondeterministic_ops(config):
  """With --deterministic, an op TensorFlow has no deterministic kernel for ends the run
  with one ConfigError line naming it (TensorFlow raises UnimplementedError at the op's
  first run)."""
  try:
    yield
  except tf.errors.UnimplementedError as error:
    message = str(getattr(error, 'message', error)).splitlines()[0]
    if not config.deterministic or 'determinis' not in message.lower():
      raise
    op = getattr(getattr(error, 'op', None), 'name', None) or 'an op'
    logging.error('%s', message)
    raise ConfigError('--deterministic: %s has no deterministic kernel on this device '
                      '(%s); run without --deterministic (seeded runs then agree to '
                      'rounding)' % (op, message)) from None
