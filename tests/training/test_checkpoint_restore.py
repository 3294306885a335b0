"""Fine-tuning restore plans, checked against checkpoints written here with known values.

No training: every checkpoint is written by a tf.train.Saver from variables set to known
NumPy arrays, and restored values are compared with those arrays.
"""

import os

import numpy as np
import pytest

from nets import nets_factory
from tf_compat import tf, slim
from training import checkpoint_restore
from core.params import ConfigError

LENET_VARIABLES = (
    'LeNet/conv1/weights', 'LeNet/conv1/biases', 'LeNet/conv2/weights',
    'LeNet/conv2/biases', 'LeNet/fc3/weights', 'LeNet/fc3/biases', 'LeNet/fc4/weights',
    'LeNet/fc4/biases')
FC4 = ('LeNet/fc4/weights', 'LeNet/fc4/biases')
BATCH_NORM_VARIABLES = tuple(
    'LeNet/%s/BatchNorm/%s' % (layer, name) for layer in ('conv1', 'conv2', 'fc3')
    for name in ('beta', 'moving_mean', 'moving_variance'))


def _build(model_name='lenet', num_classes=10, **kwargs):
  """Builds the net in the current default graph; returns its model variables."""
  network_fn = nets_factory.get_network_fn(model_name, num_classes, **kwargs)
  size = network_fn.default_image_size
  channels = 3 if model_name == 'cifarnet' else 1
  network_fn(tf.placeholder(tf.float32, [None, size, size, channels]))
  return slim.get_model_variables()


def _write_checkpoint(prefix, values, global_step=None):
  """Saves variables named like the keys of `values` holding exactly those arrays."""
  with tf.Graph().as_default():
    variables = {name: tf.Variable(value, name=name) for name, value in values.items()}
    saver = tf.train.Saver(variables)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return saver.save(sess, prefix, global_step=global_step, write_meta_graph=False)


def _random_values(variables, seed):
  rng = np.random.RandomState(seed)
  return {v.op.name: rng.standard_normal(v.get_shape().as_list()).astype(np.float32)
          for v in variables}


@pytest.fixture(scope='module')
def lenet10(tmp_path_factory):
  """(checkpoint prefix, {name: array}) of a 10-class LeNet with random known values."""
  with tf.Graph().as_default():
    values = _random_values(_build('lenet', 10), seed=1)
  directory = tmp_path_factory.mktemp('lenet10')
  prefix = _write_checkpoint(str(directory / 'model.ckpt'), values, global_step=7)
  return prefix, values


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _names(plan):
  return sorted(var.op.name for _, var in plan.restored)


# ----------------------------------------------------------------------------- plans


def test_plan_excluding_the_new_logits_restores_every_other_variable(lenet10, graph):
  prefix, _ = lenet10
  variables = _build('lenet', 5)
  plan = checkpoint_restore.plan_restore(prefix, variables, exclude_scopes=('LeNet/fc4',))
  assert plan.checkpoint_file == prefix
  assert _names(plan) == sorted(set(LENET_VARIABLES) - set(FC4))
  # Restored under their own names (no name_map).
  assert all(ckpt_name == var.op.name for ckpt_name, var in plan.restored)
  assert sorted(plan.excluded) == sorted(FC4)
  assert plan.missing == []
  assert plan.mismatched == []


def test_plan_exclude_scope_with_trailing_slash_is_the_same_scope(lenet10, graph):
  prefix, _ = lenet10
  plan = checkpoint_restore.plan_restore(prefix, _build('lenet', 5),
                                         exclude_scopes=('LeNet/fc4/',))
  assert sorted(plan.excluded) == sorted(FC4)


def test_plan_same_model_restores_everything(lenet10, graph):
  prefix, _ = lenet10
  plan = checkpoint_restore.plan_restore(prefix, _build('lenet', 10))
  assert _names(plan) == sorted(LENET_VARIABLES)
  assert plan.excluded == [] and plan.missing == [] and plan.mismatched == []


def test_unexcluded_shape_mismatch_names_variable_and_flag(lenet10, graph):
  prefix, _ = lenet10
  with pytest.raises(ConfigError) as error:
    checkpoint_restore.plan_restore(prefix, _build('lenet', 5))
  message = str(error.value)
  assert 'LeNet/fc4/weights' in message
  assert '--checkpoint_exclude_scopes' in message
  assert prefix in message
  # Both shapes are told: [1024, 5] in the model, [1024, 10] in the checkpoint.
  assert '[1024, 5]' in message and '[1024, 10]' in message


def test_exclude_scope_with_a_typo_is_an_error_naming_it(lenet10, graph):
  prefix, _ = lenet10
  with pytest.raises(ConfigError) as error:
    checkpoint_restore.plan_restore(prefix, _build('lenet', 5),
                                    exclude_scopes=('LeNet/fc44',))
  assert "'LeNet/fc44'" in str(error.value)
  assert 'checkpoint_exclude_scopes' in str(error.value)


def test_exclude_scope_is_a_whole_scope_not_a_name_prefix(lenet10, graph):
  """'LeNet/fc' must not silently exclude LeNet/fc3 and LeNet/fc4."""
  prefix, _ = lenet10
  with pytest.raises(ConfigError, match='LeNet/fc'):
    checkpoint_restore.plan_restore(prefix, _build('lenet', 10),
                                    exclude_scopes=('LeNet/fc',))


def test_variables_missing_from_checkpoint_raise_unless_ignored(tmp_path, graph):
  # A checkpoint of a 10-class LeNet without LeNet/fc4/biases.
  with tf.Graph().as_default():
    values = _random_values(_build('lenet', 10), seed=2)
  del values['LeNet/fc4/biases']
  prefix = _write_checkpoint(str(tmp_path / 'partial.ckpt'), values)
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError) as error:
    checkpoint_restore.plan_restore(prefix, variables)
  assert 'LeNet/fc4/biases' in str(error.value)
  assert '--ignore_missing_vars' in str(error.value)
  plan = checkpoint_restore.plan_restore(prefix, variables, ignore_missing_vars=True)
  assert plan.missing == ['LeNet/fc4/biases']
  assert _names(plan) == sorted(set(LENET_VARIABLES) - {'LeNet/fc4/biases'})


def test_batch_norm_model_from_checkpoint_without_batch_norm(lenet10, graph):
  prefix, _ = lenet10
  variables = _build('lenet', 10, use_batch_norm=True)
  with pytest.raises(ConfigError, match='BatchNorm'):
    checkpoint_restore.plan_restore(prefix, variables)
  plan = checkpoint_restore.plan_restore(prefix, variables, ignore_missing_vars=True)
  assert sorted(plan.missing) == sorted(BATCH_NORM_VARIABLES)
  # The layers with batch norm have no biases; every weight is restored.
  assert _names(plan) == sorted(['LeNet/conv1/weights', 'LeNet/conv2/weights',
                                 'LeNet/fc3/weights', 'LeNet/fc4/weights',
                                 'LeNet/fc4/biases'])
  assert plan.mismatched == []


def test_checkpoint_of_another_model_is_an_error(tmp_path, graph):
  with tf.Graph().as_default():
    values = _random_values(_build('cifarnet', 10), seed=3)
  prefix = _write_checkpoint(str(tmp_path / 'cifarnet.ckpt'), values)
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError, match='LeNet/'):
    checkpoint_restore.plan_restore(prefix, variables)
  with pytest.raises(ConfigError, match='no model variable would be restored'):
    checkpoint_restore.plan_restore(prefix, variables, ignore_missing_vars=True)


def test_name_map_restores_a_checkpoint_with_another_scope(lenet10, tmp_path, graph):
  """Foreign checkpoints (e.g. 'RGB/LeNet/...') load through name_map."""
  _, values = lenet10
  prefix = _write_checkpoint(str(tmp_path / 'rgb.ckpt'),
                             {'RGB/' + name: value for name, value in values.items()})
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError):
    checkpoint_restore.plan_restore(prefix, variables)
  plan = checkpoint_restore.plan_restore(prefix, variables, name_map=lambda n: 'RGB/' + n)
  assert sorted(ckpt for ckpt, _ in plan.restored) == sorted('RGB/' + n
                                                            for n in LENET_VARIABLES)
  init_fn = checkpoint_restore.make_init_fn(plan)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    init_fn(sess)
    for var in variables:
      np.testing.assert_array_equal(sess.run(var), values[var.op.name])


# ----------------------------------------------------------------------------- init_fn


def test_init_fn_restores_written_values_and_leaves_excluded_alone(lenet10, graph):
  prefix, values = lenet10
  variables = _build('lenet', 5)
  plan = checkpoint_restore.plan_restore(prefix, variables, exclude_scopes=('LeNet/fc4',))
  init_fn = checkpoint_restore.make_init_fn(plan)
  by_name = {v.op.name: v for v in variables}
  sentinel = {name: np.full(by_name[name].get_shape().as_list(), 7.0, np.float32)
              for name in FC4}
  init_op = tf.global_variables_initializer()
  graph.finalize()  # the init_fn must not add ops once the session runs
  with tf.Session() as sess:
    sess.run(init_op)
    initial = {name: sess.run(by_name[name]) for name in FC4}
    init_fn(sess)
    for name in set(LENET_VARIABLES) - set(FC4):
      np.testing.assert_array_equal(sess.run(by_name[name]), values[name], err_msg=name)
    for name in FC4:
      np.testing.assert_array_equal(sess.run(by_name[name]), initial[name], err_msg=name)
  # And an excluded variable holding anything else keeps it too.
  with tf.Session(graph=graph) as sess:
    sess.run(init_op)
    for name in FC4:
      by_name[name].load(sentinel[name], sess)
    init_fn(sess)
    for name in FC4:
      np.testing.assert_array_equal(sess.run(by_name[name]), sentinel[name])
    np.testing.assert_array_equal(sess.run(by_name['LeNet/conv1/weights']),
                                  values['LeNet/conv1/weights'])


def test_init_fn_leaves_missing_batch_norm_variables_at_initial_values(lenet10, graph):
  prefix, values = lenet10
  variables = _build('lenet', 10, use_batch_norm=True)
  plan = checkpoint_restore.plan_restore(prefix, variables, ignore_missing_vars=True)
  init_fn = checkpoint_restore.make_init_fn(plan)
  by_name = {v.op.name: v for v in variables}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    init_fn(sess)
    for name in ('LeNet/conv1/weights', 'LeNet/fc3/weights', 'LeNet/fc4/biases'):
      np.testing.assert_array_equal(sess.run(by_name[name]), values[name])
    for layer, width in (('conv1', 32), ('conv2', 64), ('fc3', 1024)):
      scope = 'LeNet/%s/BatchNorm/' % layer
      np.testing.assert_array_equal(sess.run(by_name[scope + 'beta']), np.zeros(width))
      np.testing.assert_array_equal(sess.run(by_name[scope + 'moving_mean']),
                                    np.zeros(width))
      np.testing.assert_array_equal(sess.run(by_name[scope + 'moving_variance']),
                                    np.ones(width))


def test_log_restore_report_runs(lenet10, graph):
  prefix, _ = lenet10
  plan = checkpoint_restore.plan_restore(prefix, _build('lenet', 5),
                                         exclude_scopes=('LeNet/fc4',))
  checkpoint_restore.log_restore_report(plan)


# ----------------------------------------------------------------------------- resolve


def test_resolve_checkpoint_accepts_a_prefix(lenet10):
  prefix, _ = lenet10
  assert checkpoint_restore.resolve_checkpoint(prefix) == prefix


def test_resolve_checkpoint_of_a_directory_is_its_latest(tmp_path):
  values = {'v': np.arange(3, dtype=np.float32)}
  _write_checkpoint(str(tmp_path / 'model.ckpt'), values, global_step=1)
  latest = _write_checkpoint(str(tmp_path / 'model.ckpt'), values, global_step=12)
  assert latest.endswith('model.ckpt-12')
  resolved = checkpoint_restore.resolve_checkpoint(str(tmp_path))
  assert os.path.abspath(resolved) == os.path.abspath(latest)


def test_resolve_checkpoint_missing_path_is_a_config_error(tmp_path):
  missing = str(tmp_path / 'nope' / 'model.ckpt-5')
  with pytest.raises(ConfigError) as error:
    checkpoint_restore.resolve_checkpoint(missing)
  assert missing in str(error.value) and '--checkpoint_path' in str(error.value)
  with pytest.raises(ConfigError, match='--other_flag'):
    checkpoint_restore.resolve_checkpoint(missing, flag='other_flag')


def test_resolve_checkpoint_empty_directory_is_a_config_error(tmp_path):
  with pytest.raises(ConfigError, match='holds no checkpoint'):
    checkpoint_restore.resolve_checkpoint(str(tmp_path))


@pytest.mark.parametrize('suffix', ['.index', '.data-00000-of-00001'])
def test_resolve_checkpoint_given_a_checkpoint_file_gives_its_prefix(lenet10, suffix):
  """Users often pass model.ckpt-N.index (or .data-...); the prefix is meant.

  Either that file is resolved to its prefix, or it is refused with a ConfigError; it
  must not reach the checkpoint reader as a "prefix" (a DataLossError traceback for
  .data, "no model variable would be restored" for .index).
  """
  prefix, _ = lenet10
  try:
    resolved = checkpoint_restore.resolve_checkpoint(prefix + suffix)
  except ConfigError:
    return
  assert resolved == prefix


def test_train_dir_checkpoint(tmp_path):
  assert checkpoint_restore.train_dir_checkpoint(None) is None
  assert checkpoint_restore.train_dir_checkpoint(str(tmp_path / 'absent')) is None
  assert checkpoint_restore.train_dir_checkpoint(str(tmp_path)) is None
  latest = _write_checkpoint(str(tmp_path / 'model.ckpt'), {'v': np.zeros(2, np.float32)},
                             global_step=4)
  assert checkpoint_restore.train_dir_checkpoint(str(tmp_path)) == latest
