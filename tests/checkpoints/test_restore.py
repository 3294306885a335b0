"""Fine-tuning restore plans, checked against checkpoints written here with known values.

No training: every checkpoint is written by a tf.train.Saver from variables set to known
NumPy arrays, and restored values are compared with those arrays.
"""

import os
import shutil

import numpy as np
import pytest

from nets import nets_factory
from tf_compat import tf, slim
from checkpoints import restore
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
  plan = restore.plan_fine_tuning(prefix, variables, exclude_scopes=('LeNet/fc4',))
  assert plan.checkpoint_file == prefix
  assert _names(plan) == sorted(set(LENET_VARIABLES) - set(FC4))
  # Restored under their own names (no name_map).
  assert all(ckpt_name == var.op.name for ckpt_name, var in plan.restored)
  assert sorted(plan.excluded) == sorted(FC4)
  assert plan.missing == ()
  assert plan.mismatched == ()


def test_plan_exclude_scope_with_trailing_slash_is_the_same_scope(lenet10, graph):
  prefix, _ = lenet10
  plan = restore.plan_fine_tuning(prefix, _build('lenet', 5),
                                         exclude_scopes=('LeNet/fc4/',))
  assert sorted(plan.excluded) == sorted(FC4)


def test_plan_same_model_restores_everything(lenet10, graph):
  prefix, _ = lenet10
  plan = restore.plan_fine_tuning(prefix, _build('lenet', 10))
  assert _names(plan) == sorted(LENET_VARIABLES)
  assert plan.excluded == () and plan.missing == () and plan.mismatched == ()


def test_unexcluded_shape_mismatch_names_variable_and_flag(lenet10, graph):
  prefix, _ = lenet10
  with pytest.raises(ConfigError) as error:
    restore.plan_fine_tuning(prefix, _build('lenet', 5))
  message = str(error.value)
  assert 'LeNet/fc4/weights' in message
  assert '--checkpoint_exclude_scopes' in message
  assert prefix in message
  # Both shapes are told: [1024, 5] in the model, [1024, 10] in the checkpoint.
  assert '[1024, 5]' in message and '[1024, 10]' in message


def test_exclude_scope_with_a_typo_is_an_error_naming_it(lenet10, graph):
  prefix, _ = lenet10
  with pytest.raises(ConfigError) as error:
    restore.plan_fine_tuning(prefix, _build('lenet', 5),
                                    exclude_scopes=('LeNet/fc44',))
  assert "'LeNet/fc44'" in str(error.value)
  assert 'checkpoint_exclude_scopes' in str(error.value)


def test_exclude_scope_is_a_whole_scope_not_a_name_prefix(lenet10, graph):
  """'LeNet/fc' must not silently exclude LeNet/fc3 and LeNet/fc4."""
  prefix, _ = lenet10
  with pytest.raises(ConfigError, match='LeNet/fc'):
    restore.plan_fine_tuning(prefix, _build('lenet', 10),
                                    exclude_scopes=('LeNet/fc',))


def test_variables_missing_from_checkpoint_raise_unless_ignored(tmp_path, graph):
  # A checkpoint of a 10-class LeNet without LeNet/fc4/biases.
  with tf.Graph().as_default():
    values = _random_values(_build('lenet', 10), seed=2)
  del values['LeNet/fc4/biases']
  prefix = _write_checkpoint(str(tmp_path / 'partial.ckpt'), values)
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError) as error:
    restore.plan_fine_tuning(prefix, variables)
  assert 'LeNet/fc4/biases' in str(error.value)
  assert '--ignore_missing_vars' in str(error.value)
  plan = restore.plan_fine_tuning(prefix, variables, ignore_missing_vars=True)
  assert plan.missing == ('LeNet/fc4/biases',)
  assert _names(plan) == sorted(set(LENET_VARIABLES) - {'LeNet/fc4/biases'})


def test_batch_norm_model_from_checkpoint_without_batch_norm(lenet10, graph):
  prefix, _ = lenet10
  variables = _build('lenet', 10, use_batch_norm=True)
  with pytest.raises(ConfigError, match='BatchNorm'):
    restore.plan_fine_tuning(prefix, variables)
  plan = restore.plan_fine_tuning(prefix, variables, ignore_missing_vars=True)
  assert sorted(plan.missing) == sorted(BATCH_NORM_VARIABLES)
  # The layers with batch norm have no biases; every weight is restored.
  assert _names(plan) == sorted(['LeNet/conv1/weights', 'LeNet/conv2/weights',
                                 'LeNet/fc3/weights', 'LeNet/fc4/weights',
                                 'LeNet/fc4/biases'])
  assert plan.mismatched == ()


def test_checkpoint_of_another_model_is_an_error(tmp_path, graph):
  with tf.Graph().as_default():
    values = _random_values(_build('cifarnet', 10), seed=3)
  prefix = _write_checkpoint(str(tmp_path / 'cifarnet.ckpt'), values)
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError, match='LeNet/'):
    restore.plan_fine_tuning(prefix, variables)
  with pytest.raises(ConfigError, match='no model variable would be restored'):
    restore.plan_fine_tuning(prefix, variables, ignore_missing_vars=True)


def test_name_map_restores_a_checkpoint_with_another_scope(lenet10, tmp_path, graph):
  """Foreign checkpoints (e.g. 'RGB/LeNet/...') load through name_map."""
  _, values = lenet10
  prefix = _write_checkpoint(str(tmp_path / 'rgb.ckpt'),
                             {'RGB/' + name: value for name, value in values.items()})
  variables = _build('lenet', 10)
  with pytest.raises(ConfigError):
    restore.plan_fine_tuning(prefix, variables)
  plan = restore.plan_fine_tuning(prefix, variables, name_map=lambda n: 'RGB/' + n)
  assert sorted(ckpt for ckpt, _ in plan.restored) == sorted('RGB/' + n
                                                            for n in LENET_VARIABLES)
  init_fn = restore.make_init_fn(plan)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    init_fn(sess)
    for var in variables:
      np.testing.assert_array_equal(sess.run(var), values[var.op.name])


# ----------------------------------------------------------------------------- init_fn


def test_init_fn_restores_written_values_and_leaves_excluded_alone(lenet10, graph):
  prefix, values = lenet10
  variables = _build('lenet', 5)
  plan = restore.plan_fine_tuning(prefix, variables, exclude_scopes=('LeNet/fc4',))
  init_fn = restore.make_init_fn(plan)
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
  plan = restore.plan_fine_tuning(prefix, variables, ignore_missing_vars=True)
  init_fn = restore.make_init_fn(plan)
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
  plan = restore.plan_fine_tuning(prefix, _build('lenet', 5),
                                         exclude_scopes=('LeNet/fc4',))
  restore.log_restore_report(plan)


# ------------------------------------------------------------------------- inference


def _fit(num_classes=10, channels=1):
  return restore.ModelFit(model_name='lenet', num_classes=num_classes, channels=channels,
                          data_flag='dataset_dir=/data/digits')


def test_inference_plan_restores_every_variable_and_reads_the_step(lenet10, graph):
  prefix, _ = lenet10
  plan = restore.plan_inference(prefix, _build('lenet', 10), _fit())
  assert _names(plan) == sorted(LENET_VARIABLES)
  assert plan.global_step == 7 and not plan.moving_averages


def test_inference_plan_takes_moving_averages_where_the_checkpoint_has_them(tmp_path, graph):
  variables = _build('lenet', 10)
  values = _random_values(variables, seed=2)
  shadows = {name + restore.EMA_SUFFIX: value + 1 for name, value in values.items()
             if name.endswith('weights')}
  prefix = _write_checkpoint(str(tmp_path / 'model.ckpt'), dict(values, **shadows), 3)
  for mode in ('auto', 'true'):
    plan = restore.plan_inference(prefix, variables, _fit(), moving_averages=mode)
    assert plan.moving_averages
    assert {n for n in plan.var_list if n.endswith(restore.EMA_SUFFIX)} == set(shadows)
  plan = restore.plan_inference(prefix, variables, _fit(), moving_averages='false')
  assert sorted(plan.var_list) == sorted(values)


def test_inference_plan_refuses_true_without_moving_averages(lenet10, graph):
  with pytest.raises(ConfigError, match='holds no moving averages'):
    restore.plan_inference(lenet10[0], _build('lenet', 10), _fit(), moving_averages='true')


def test_inference_plan_names_another_class_count(lenet10, graph):
  with pytest.raises(ConfigError, match=r'was trained for 10 classes, but '
                                        r'--dataset_dir=/data/digits has 5$'):
    restore.plan_inference(lenet10[0], _build('lenet', 5), _fit(num_classes=5))


def test_inference_plan_names_another_model(lenet10, graph):
  with pytest.raises(ConfigError, match='is not a --model_name=lenet checkpoint'):
    restore.plan_inference(lenet10[0], _build('cifarnet', 10), _fit(channels=3))


def test_an_unreadable_checkpoint_is_a_config_error_naming_the_flag(tmp_path, graph):
  damaged = tmp_path / 'model.ckpt-1'
  (tmp_path / 'model.ckpt-1.index').write_bytes(b'not an index')
  with pytest.raises(ConfigError, match='--flow_checkpoint_path=.*not a readable'):
    restore.plan_inference(str(damaged), _build('lenet', 10), _fit(),
                           flag='flow_checkpoint_path')


def test_restore_inference_restores_the_checkpoints_values(lenet10, graph):
  prefix, values = lenet10
  variables = _build('lenet', 10)
  with tf.Session(graph=graph) as sess:
    plan = restore.restore_inference(sess, prefix, _fit())
    for variable in variables:
      np.testing.assert_array_equal(sess.run(variable), values[variable.op.name])
  assert plan.global_step == 7 and _names(plan) == sorted(LENET_VARIABLES)


def test_restore_inference_names_a_checkpoint_whose_data_is_damaged(lenet10, tmp_path,
                                                                     graph):
  """The plan reads the index only; data cut short since is one line naming the flag."""
  source = os.path.dirname(lenet10[0])
  for name in os.listdir(source):
    shutil.copy(os.path.join(source, name), str(tmp_path / name))
  prefix = str(tmp_path / os.path.basename(lenet10[0]))
  (data,) = [name for name in os.listdir(str(tmp_path)) if '.data-' in name]
  with open(str(tmp_path / data), 'r+b') as handle:
    handle.truncate(16)
  _build('lenet', 10)
  with tf.Session(graph=graph) as sess:
    with pytest.raises(ConfigError, match='--flow_checkpoint_path=%s could not be read: '
                       % prefix) as error:
      restore.restore_inference(sess, prefix, _fit(), flag='flow_checkpoint_path')
  assert '\n' not in str(error.value)
