"""Frozen batch norm for fine-tuning: the one switch every net with batch norm takes.

A net with batch norm takes `freeze_batch_norm` (one of FREEZE_MODES) beside
`is_training` and builds its batch norm layers inside `batch_norm_scope`:

    none        training mode: each batch is normalised with its own statistics and the
                moving mean/variance are updated (tf.GraphKeys.UPDATE_OPS).
    statistics  batch norm alone in inference mode (slim's is_training=False): the moving
                mean/variance, as restored from the checkpoint, normalise every batch and
                are never updated (no update ops); beta/gamma still train. Dropout and
                everything else still follow `is_training`.
    all         as `statistics`, and beta/gamma are not trainable either (slim's
                trainable=False: left out of TRAINABLE_VARIABLES, still model variables,
                so checkpoints hold them): batch norm is a fixed affine map.

Why: per-device batches of 2 to 8 clips (I3D on one GPU) give noisy batch statistics,
and gradient accumulation does not change what batch norm sees. Video fine-tuning
recipes freeze it: TSN's partial BN (UCF101/HMDB51 from ImageNet; statistics and
affine frozen in every BN but the first), the I3D 128-frame runs of the Non-local
networks (frozen BN), Detectron's frozen BN for small per-GPU batches. Evaluation builds
nets with is_training=False, where every mode is the same.
"""

from tf_compat import slim

__all__ = ['FREEZE_MODES', 'NONE', 'STATISTICS', 'ALL', 'check_freeze_mode',
           'batch_norm_scope']

NONE, STATISTICS, ALL = 'none', 'statistics', 'all'
FREEZE_MODES = (NONE, STATISTICS, ALL)


def check_freeze_mode(freeze_batch_norm):
  if freeze_batch_norm not in FREEZE_MODES:
    raise ValueError('freeze_batch_norm=%r is not known; valid: %s'
                     % (freeze_batch_norm, ', '.join(FREEZE_MODES)))


def batch_norm_scope(is_training, freeze_batch_norm=NONE):
  """A `slim.arg_scope` for `slim.batch_norm`: training mode only when `is_training` and
  not frozen; beta/gamma trainable unless `freeze_batch_norm` is 'all'.

  Enter it where the net sets its own batch norm mode, so it overrides enclosing scopes.
  """
  check_freeze_mode(freeze_batch_norm)
  return slim.arg_scope([slim.batch_norm],
                        is_training=is_training if freeze_batch_norm == NONE else False,
                        trainable=freeze_batch_norm != ALL)
