"""The one place that makes TensorFlow 2.21 behave like the TF 1 graph world slim needs.

Every entry point and every library module imports `tf` and `slim` from here, first:

    from tf_compat import tf, slim

Importing this module, once, does four things (and imports tf-slim without the
scikit-learn it would pull in: `_import_slim`):

1. Quiet start-up. TensorFlow's C++ INFO/WARNING lines and its Python deprecation
   warnings are silenced before `tensorflow` is imported, so users see our own log
   lines rather than a wall of notices they cannot act on. Set
   `SLIMDEPLOY_TF_VERBOSE=1` to get them all back when debugging TensorFlow itself.
2. `tf` is `tensorflow.compat.v1` with v2 behaviour disabled: graph mode, sessions,
   collections, ref variables by default.
3. tf-slim 1.1.0 (the last release) works on TF >= 2.13. TensorFlow lazily imports
   `tf_keras.legacy_tf_layers.*` for `tf.compat.v1.layers`, which `slim.batch_norm`
   uses, but tf-keras ships those modules as `tf_keras.src.legacy_tf_layers.*`. We
   register the shipped modules under the expected names in `sys.modules`. The fix in
   tf-slim's repository was never released (google-research/tf-slim#24). tf-keras must
   be installed at TensorFlow's minor version. It is pinned in requirements-tfkeras.txt,
   not requirements.txt, and installed on its own with
   `pip install --no-deps -r requirements-tfkeras.txt` (`make setup` does it): tf-keras
   declares a dependency on the `tensorflow` wheel, which pip would install on top of
   `tensorflow-cpu`, two packages writing the same files.
   tf-slim also refers to `tensorflow.python.framework.ops.Tensor`, which TF 2.21 removed
   (fused batch norm on 2-D inputs, `multiply_gradients`, `optimize_loss`,
   `constant_value`); we point that name back at `tf.Tensor`.
4. oneDNN's CPU kernels on every x86 CPU (`TF_ENABLE_ONEDNN_OPTS=1` unless set):
   TensorFlow's default turns them on only on some CPUs (AVX-512 VNNI/BF16 or AMX: an
   AMD EPYC of Zen 4 and an Intel Xeon of Sapphire Rapids both), and its Eigen kernels
   for 3-D convolution gradients and 3-D max-pool gradients are several times slower on
   AVX2-only CPUs. Which oneDNN kernels run still differs by CPU: float16 ones only with
   AVX-512 FP16 or AMX-FP16 (Sapphire Rapids), slow there for convolution gradients
   (deployment.session.precision_options.half_precision_device_warning).
"""

import importlib
import logging
import os
import sys
import warnings

_VERBOSE = os.environ.get('SLIMDEPLOY_TF_VERBOSE') == '1'

if not _VERBOSE:
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# oneDNN's CPU kernels. TensorFlow turns them on by itself only on CPUs with AVX-512
# VNNI/BF16 or AMX; on AVX2-only CPUs (AMD EPYC Zen 3, for one) its Eigen kernels for
# Conv3D's gradients and MaxPool3DGrad ran a narrow I3D's training step 2.7x slower
# (0.83 s against 0.31 s, batch 8 of 8x64x64 clips). Set TF_ENABLE_ONEDNN_OPTS=0 to
# get TensorFlow's own choice back.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')
# Keras 3 cannot build TF1 graphs; make `tf.keras` resolve to Keras 2 (tf-keras).
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

_LEGACY_LAYER_MODULES = ('base', 'convolutional', 'core', 'normalization', 'pooling',
                         'variable_scope_shim', 'migration_utils')


def _alias_tf_keras_legacy_layers():
  """Makes `tf_keras.legacy_tf_layers[.x]` importable (see the module docstring)."""
  if 'tf_keras.legacy_tf_layers' in sys.modules:
    return
  try:
    package = importlib.import_module('tf_keras.src.legacy_tf_layers')
  except ImportError as error:
    raise ImportError(
        'tf-keras is required by tf-slim on TensorFlow >= 2.13; install it with '
        '`pip install --no-deps -r requirements-tfkeras.txt`') from error
  sys.modules['tf_keras.legacy_tf_layers'] = package
  for name in _LEGACY_LAYER_MODULES:
    module = importlib.import_module('tf_keras.src.legacy_tf_layers.' + name)
    sys.modules['tf_keras.legacy_tf_layers.' + name] = module
  sys.modules['tf_keras'].legacy_tf_layers = package


def _restore_ops_tensor_alias(tf_module):
  """tf-slim 1.1.0 checks `isinstance(x, ops.Tensor)`; TF 2.21 dropped that alias."""
  from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
  if not hasattr(ops, 'Tensor'):
    ops.Tensor = tf_module.Tensor


def _quiet_python_warnings(tf_module):
  if _VERBOSE:
    return
  tf_module.get_logger().setLevel(logging.ERROR)
  from tensorflow.python.util import deprecation  # pylint: disable=import-outside-toplevel
  deprecation._PRINT_DEPRECATION_WARNINGS = False  # pylint: disable=protected-access
  for module in ('tensorflow', 'tf_keras', 'tf_slim', 'keras'):
    warnings.filterwarnings('ignore', category=DeprecationWarning, module=module)
    warnings.filterwarnings('ignore', category=UserWarning, module=module)
    warnings.filterwarnings('ignore', category=FutureWarning, module=module)


def _import_tensorflow_quietly():
  """Imports TensorFlow with file descriptor 2 muted unless verbose.

  TensorFlow's native start-up notices (oneDNN, CPU features) are printed before
  absl logging is initialised, so TF_CPP_MIN_LOG_LEVEL cannot hide them. A failed
  import still raises normally after stderr is restored.
  """
  if _VERBOSE:
    return importlib.import_module('tensorflow.compat.v1')
  sys.stderr.flush()
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    return importlib.import_module('tensorflow.compat.v1')
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)


tf = _import_tensorflow_quietly()
_quiet_python_warnings(tf)
tf.disable_v2_behavior()
_alias_tf_keras_legacy_layers()
_restore_ops_tensor_alias(tf)



def _import_slim():
  """tf_slim, without the scikit-learn it imports if installed.

  tf-slim's `losses.metric_learning` imports `sklearn.metrics` when it can (and with it
  SciPy's statistics): about 1 s of every process's start-up on this 2-core machine, for
  metric-learning losses nothing here uses. The name is hidden only during the import;
  `sklearn` imports normally afterwards (the digits conversion uses it).
  """
  hidden = 'sklearn.metrics' not in sys.modules
  if hidden:
    sys.modules['sklearn.metrics'] = None
  try:
    return importlib.import_module('tf_slim')
  finally:
    if hidden:
      del sys.modules['sklearn.metrics']


slim = _import_slim()

__all__ = ['tf', 'slim']
