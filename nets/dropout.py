"""Dropout whose masks a resumed run draws again: slim.dropout, keyed by the step.

slim.dropout draws its mask from a stateful random op, whose generator starts again when a
run resumes from a checkpoint: after a resume the masks are not those of the run that went
straight through. When the graph holds a step seed (`set_step_seed`, the trainer's with
--random_seed: [a seed of the run, the global step]), each training call here draws its
mask statelessly (`tf.nn.experimental.stateless_dropout`) from that step seed and the call's
number in the graph (clone, micro-batch, layer, in build order), so a mask is a function
of the run's seed, the call and the step. Without a step seed, or not training, it is
slim.dropout itself. Same arguments, same name scopes, no variables.
"""

from tf_compat import tf, slim

__all__ = ['dropout', 'set_step_seed']

_STEP_SEED = 'slimdeploy_dropout_step_seed'  # int64 [2]: run seed, global step
_CALLS = 'slimdeploy_dropout_calls'


def set_step_seed(step_seed):
  """Makes the default graph's training dropout stateless, keyed by `step_seed` (int64 [2])."""
  tf.add_to_collection(_STEP_SEED, step_seed)


@slim.add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True,
            outputs_collections=None, scope=None):
  """slim.dropout's signature and behaviour; see the module doc for the mask."""
  step_seed = tf.get_collection(_STEP_SEED)
  if not step_seed or not isinstance(is_training, bool) or not is_training:
    return slim.dropout(inputs, keep_prob, noise_shape=noise_shape, is_training=is_training,
                        outputs_collections=outputs_collections, scope=scope)
  call = len(tf.get_collection(_CALLS))
  tf.add_to_collection(_CALLS, call)
  with tf.name_scope(scope, 'Dropout', [inputs]) as name_scope:
    seed = step_seed[0] + tf.constant([call + 1, 0], tf.int64) * tf.constant([7919, 1],
                                                                             tf.int64)
    outputs = tf.nn.experimental.stateless_dropout(
        inputs, rate=1.0 - keep_prob, seed=seed, noise_shape=noise_shape)
    return slim.utils.collect_named_outputs(outputs_collections, name_scope, outputs)
