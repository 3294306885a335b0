"""Variable scope handling shared by the net files."""

import contextlib

from tf_compat import tf


@contextlib.contextmanager
def reentrant_variable_scope(scope, default_name, values):
  """`tf.variable_scope` that re-enters a VariableScope without nesting op names.

  A net function opens its scope and passes the VariableScope object to its
  `_base`. Plain re-entry keeps variable names (`LeNet/conv1/weights`) but puts ops
  under a nested name scope (`LeNet/LeNet/conv1/Relu`); re-entering the scope's
  original name scope keeps slim's op names (`LeNet/conv1/Relu`), which exported
  graphs refer to.

  Args:
    scope: a scope name, None, or a tf.VariableScope to re-enter.
    default_name: name used when `scope` is None (uniquified like any default).
    values: the input tensors, as for tf.variable_scope.

  Yields:
    The tf.VariableScope entered.
  """
  if isinstance(scope, tf.VariableScope):
    with (tf.variable_scope(scope, auxiliary_name_scope=False) as entered,
          tf.name_scope(entered.original_name_scope)):
      yield entered
  else:
    with tf.variable_scope(scope, default_name, values) as entered:
      yield entered
