"""Tests for training/setup.py: check_train_config, every rule, before any graph.

Expected values are hand arithmetic on the fixed digits split (1437 train examples,
10 classes) and LeNet's registered defaults (28x28, 'lenet' preprocessing).
"""

import dataclasses
import os
import re

import pytest

from tf_compat import tf
from training.config import TrainConfig
from core.params import ConfigError
from training.setup import TrainSetup, check_train_config

DIGITS_TRAIN = 1437


@pytest.fixture
def valid(digits_dir, tmp_path):
  """A valid single-machine digits/lenet config; tests change one field at a time."""
  return TrainConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                     train_dir=str(tmp_path / 'train'))


def test_valid_config_resolves_everything(valid):
  setup = check_train_config(valid)
  assert isinstance(setup, TrainSetup)
  assert setup.global_batch == 32
  assert setup.steps_per_epoch == pytest.approx(1437 / 32)
  assert setup.input_settings.image_size == 28
  assert setup.input_settings.preprocessing_name == 'lenet'
  assert setup.network_spec.name == 'lenet'
  assert setup.dataset.num_samples == DIGITS_TRAIN
  assert setup.dataset.num_classes == 10
  assert setup.dataset.split_name == 'train'
  assert setup.checkpoint_file is None
  assert setup.resume_checkpoint is None
  assert setup.deploy_config.num_clones == 1
  with pytest.raises(dataclasses.FrozenInstanceError):
    setup.global_batch = 1


@pytest.mark.parametrize('changes, global_batch', [
    (dict(batch_size=32, num_clones=2, clone_on_cpu=True), 64),
    (dict(batch_size=10, num_clones=3, clone_on_cpu=True), 30),
    # Asynchronous workers: every worker moves the global step with its own batch.
    (dict(batch_size=16, num_clones=2, clone_on_cpu=True, worker_replicas=3,
          num_ps_tasks=1, replicas_to_aggregate=3), 32),
    # Synchronous: one step waits for replicas_to_aggregate workers' gradients.
    (dict(batch_size=16, num_clones=2, clone_on_cpu=True, worker_replicas=3,
          num_ps_tasks=1, replicas_to_aggregate=3, sync_replicas=True), 96),
    (dict(batch_size=8, num_clones=1, worker_replicas=4, num_ps_tasks=2, task=3,
          replicas_to_aggregate=2, sync_replicas=True), 16),
    # Micro-batches: each clone accumulates num_micro_batches batches per update.
    (dict(batch_size=3, num_micro_batches=2), 6),
    (dict(batch_size=4, num_clones=2, clone_on_cpu=True, num_micro_batches=3, worker_replicas=2,
          num_ps_tasks=1, replicas_to_aggregate=2, sync_replicas=True), 48),
])
def test_global_batch_and_steps_per_epoch(valid, changes, global_batch):
  setup = check_train_config(dataclasses.replace(valid, **changes))
  assert setup.global_batch == global_batch
  assert setup.steps_per_epoch == pytest.approx(DIGITS_TRAIN / global_batch)


def test_image_size_and_preprocessing_overrides(valid):
  setup = check_train_config(dataclasses.replace(
      valid, train_image_size=32, preprocessing_name='cifarnet'))
  assert setup.input_settings.image_size == 32
  assert setup.input_settings.preprocessing_name == 'cifarnet'


def test_other_network_default_size(valid):
  setup = check_train_config(dataclasses.replace(valid, model_name='cifarnet'))
  assert (setup.input_settings.image_size, setup.input_settings.preprocessing_name) == (32, 'cifarnet')


def test_check_builds_no_graph_and_writes_nothing(valid):
  with tf.Graph().as_default() as graph:
    check_train_config(dataclasses.replace(valid, num_clones=2, clone_on_cpu=True))
    assert graph.get_operations() == []
    assert tf.get_default_graph() is graph
  assert not os.path.exists(valid.train_dir)


def test_existing_checkpoint_is_resolved(valid, tmp_path):
  ckpt_dir = tmp_path / 'pretrained'
  with tf.Graph().as_default():
    tf.Variable(1.0, name='v')
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(ckpt_dir / 'model.ckpt'), global_step=5)
  by_dir = check_train_config(dataclasses.replace(valid, checkpoint_path=str(ckpt_dir)))
  by_prefix = check_train_config(dataclasses.replace(valid, checkpoint_path=prefix))
  assert by_dir.checkpoint_file == prefix == str(ckpt_dir / 'model.ckpt-5')
  assert by_prefix.checkpoint_file == prefix
  assert by_dir.resume_checkpoint is None


# --------------------------------------------------------------------------------------
# One rule per case: the ConfigError's single line names the flag (and what is valid).

VALID_OPTIMIZERS = ['adadelta', 'adagrad', 'adam', 'ftrl', 'momentum', 'rmsprop', 'sgd']
VALID_SCHEDULES = ['cosine', 'exponential', 'fixed', 'piecewise', 'polynomial']

RULES = [
    # (id, changes, flag named, other texts the message must hold)
    ('batch_size_negative', dict(batch_size=-1), 'batch_size', ['-1']),
    ('batch_size_zero', dict(batch_size=0), 'batch_size', []),
    ('num_clones_zero', dict(num_clones=0), 'num_clones', []),
    ('worker_replicas_zero', dict(worker_replicas=0), 'worker_replicas', []),
    ('num_readers_zero', dict(num_readers=0), 'num_readers', []),
    ('max_steps_zero', dict(max_number_of_steps=0), 'max_number_of_steps', []),
    ('unknown_optimizer', dict(optimizer='adamw'), 'optimizer',
     ['adamw'] + VALID_OPTIMIZERS),
    ('unknown_decay_type', dict(learning_rate_decay_type='step'),
     'learning_rate_decay_type', ['step'] + VALID_SCHEDULES),
    ('learning_rate_zero', dict(learning_rate=0.0), 'learning_rate', []),
    ('learning_rate_negative', dict(learning_rate=-0.1), 'learning_rate', ['-0.1']),
    ('learning_rate_nan', dict(learning_rate=float('nan')), 'learning_rate', []),
    ('opt_epsilon_zero', dict(opt_epsilon=0.0), 'opt_epsilon', []),
    ('momentum_one', dict(momentum=1.0), 'momentum', []),
    ('adam_beta2_negative', dict(adam_beta2=-0.5), 'adam_beta2', []),
    # tf.train refuses these when the graph is built (ValueError, a traceback): the check
    # must catch them first.
    ('adagrad_initial_accumulator_zero', dict(optimizer='adagrad',
                                              adagrad_initial_accumulator_value=0.0),
     'adagrad_initial_accumulator_value', []),
    ('ftrl_learning_rate_power_positive', dict(optimizer='ftrl', ftrl_learning_rate_power=0.5),
     'ftrl_learning_rate_power', []),
    ('ftrl_l1_negative', dict(optimizer='ftrl', ftrl_l1=-1.0), 'ftrl_l1', []),
    ('missing_dataset_name', dict(dataset_name=None), 'dataset_name', ['digits']),
    ('unknown_dataset_name', dict(dataset_name='imagenet'), 'dataset_name',
     ['imagenet', 'digits', 'image_folder']),
    ('unknown_split', dict(dataset_split_name='validation'), 'dataset_split_name',
     ['validation', 'train', 'test']),
    ('missing_dataset_dir', dict(dataset_dir=None), 'dataset_dir',
     ['python -m datasets.convert_images --dataset_name=digits']),
    ('empty_dataset_dir', dict(dataset_dir=''), 'dataset_dir',
     ['python -m datasets.convert_images --dataset_name=digits']),
    ('missing_model_name', dict(model_name=None), 'model_name', ['lenet', 'cifarnet']),
    ('unknown_model_name', dict(model_name='inception_v3'), 'model_name',
     ['inception_v3', 'lenet', 'cifarnet']),
    ('replicas_to_aggregate_above_workers', dict(replicas_to_aggregate=3, worker_replicas=2,
                                                 num_ps_tasks=1, sync_replicas=True),
     'replicas_to_aggregate', ['worker_replicas']),
    ('replicas_to_aggregate_above_workers_async', dict(replicas_to_aggregate=2),
     'replicas_to_aggregate', ['worker_replicas']),
    ('task_not_below_workers', dict(task=2, worker_replicas=2, num_ps_tasks=1), 'task',
     ['worker_replicas']),
    ('task_negative', dict(task=-1), 'task', []),
    ('workers_without_ps', dict(worker_replicas=2, num_ps_tasks=0), 'num_ps_tasks', []),
    ('piecewise_too_few_values', dict(learning_rate_decay_type='piecewise',
                                      learning_rate_boundaries=(100, 200),
                                      learning_rate_values=(0.1, 0.01)),
     'learning_rate_values', ['learning_rate_boundaries']),
    ('piecewise_too_many_values', dict(learning_rate_decay_type='piecewise',
                                       learning_rate_boundaries=(100,),
                                       learning_rate_values=(0.1, 0.01, 0.001)),
     'learning_rate_values', []),
    ('piecewise_no_values', dict(learning_rate_decay_type='piecewise'),
     'learning_rate_values', []),
    ('piecewise_decreasing', dict(learning_rate_decay_type='piecewise',
                                  learning_rate_boundaries=(200, 100),
                                  learning_rate_values=(0.1, 0.01, 0.001)),
     'learning_rate_boundaries', ['200,100']),
    ('piecewise_repeated', dict(learning_rate_decay_type='piecewise',
                                learning_rate_boundaries=(100, 100),
                                learning_rate_values=(0.1, 0.01, 0.001)),
     'learning_rate_boundaries', []),
    ('piecewise_zero_boundary', dict(learning_rate_decay_type='piecewise',
                                     learning_rate_boundaries=(0, 100),
                                     learning_rate_values=(0.1, 0.01, 0.001)),
     'learning_rate_boundaries', []),
    ('piecewise_negative_value', dict(learning_rate_decay_type='piecewise',
                                      learning_rate_boundaries=(100,),
                                      learning_rate_values=(0.1, -0.01)),
     'learning_rate_values', []),
    ('cosine_without_max_steps', dict(learning_rate_decay_type='cosine'),
     'max_number_of_steps', ['cosine']),
    ('num_epochs_per_decay_zero', dict(num_epochs_per_decay=0.0), 'num_epochs_per_decay',
     []),
    ('warmup_negative', dict(warmup_epochs=-1.0), 'warmup_epochs', []),
    ('label_smoothing_one', dict(label_smoothing=1.0), 'label_smoothing', []),
    ('label_smoothing_above_one', dict(label_smoothing=1.5), 'label_smoothing', []),
    ('moving_average_decay_zero', dict(moving_average_decay=0.0), 'moving_average_decay',
     []),
    ('moving_average_decay_one', dict(moving_average_decay=1.0), 'moving_average_decay',
     []),
    ('moving_average_decay_above_one', dict(moving_average_decay=1.5),
     'moving_average_decay', []),
    ('gpu_memory_fraction_above_one', dict(gpu_memory_fraction=1.5),
     'gpu_memory_fraction', []),
    ('gpu_memory_fraction_negative', dict(gpu_memory_fraction=-0.1),
     'gpu_memory_fraction', []),
    ('weight_decay_negative', dict(weight_decay=-1e-4), 'weight_decay', []),
    ('clip_gradient_norm_negative', dict(clip_gradient_norm=-1.0), 'clip_gradient_norm',
     []),
    ('missing_train_dir', dict(train_dir=None), 'train_dir', []),
    ('empty_train_dir', dict(train_dir=''), 'train_dir', []),
    ('labels_offset_too_large', dict(labels_offset=10), 'labels_offset', ['10']),
    ('train_image_size_zero', dict(train_image_size=0), 'train_image_size', []),
    ('train_image_size_negative', dict(train_image_size=-5), 'train_image_size', ['-5']),
    ('num_micro_batches_zero', dict(num_micro_batches=0), 'num_micro_batches', ['>= 1']),
    ('unknown_freeze_batch_norm', dict(freeze_batch_norm='stats'), 'freeze_batch_norm',
     ['stats', 'none, statistics, all']),
    ('freeze_batch_norm_without_batch_norm', dict(freeze_batch_norm='all',
                                                  model_name='cifarnet'),
     'freeze_batch_norm', ['cifarnet', 'i3d, lenet']),
    ('freeze_batch_norm_lenet_without_batch_norm', dict(freeze_batch_norm='statistics'),
     'freeze_batch_norm', ['--use_batch_norm']),
    ('save_interval_steps_negative', dict(save_interval_steps=-1), 'save_interval_steps',
     ['>= 0']),
    ('save_summaries_steps_negative', dict(save_summaries_steps=-5), 'save_summaries_steps',
     ['>= 0']),
    ('precise_bn_batches_negative', dict(precise_bn_batches=-1), 'precise_bn_batches',
     ['>= 0']),
    ('precise_bn_without_batch_norm', dict(precise_bn_batches=10, model_name='cifarnet'),
     'precise_bn_batches', ['cifarnet', 'i3d, lenet']),
    ('precise_bn_lenet_without_batch_norm', dict(precise_bn_batches=10),
     'precise_bn_batches', ['--use_batch_norm']),
    ('precise_bn_with_frozen_statistics', dict(precise_bn_batches=10, use_batch_norm=True,
                                               freeze_batch_norm='statistics'),
     'precise_bn_batches', ['--freeze_batch_norm=statistics']),
    ('data_service_sharding_unknown', dict(data_service_address='h:5050',
                                           data_service_sharding='round_robin'),
     'data_service_sharding', ['dynamic', 'files']),
    ('data_service_files_without_address', dict(data_service_sharding='files'),
     'data_service_sharding', ['--data_service_address']),
    ('data_service_address_without_port', dict(data_service_address='dispatcher'),
     'data_service_address', ['host:port']),
]


def names_flag(message, flag):
  """The flag's name as a whole word (end_learning_rate does not name learning_rate)."""
  return re.search(r'(?<![\w-])(--)?%s(?![\w])' % re.escape(flag), message) is not None


def test_names_flag():
  assert names_flag('--learning_rate=0 must be > 0', 'learning_rate')
  assert names_flag('num_ps_tasks=0: with num_replicas=2', 'num_ps_tasks')
  assert not names_flag('--end_learning_rate=0', 'learning_rate')
  assert not names_flag("split_name 'x' is not a digits split", 'dataset_split_name')


@pytest.mark.parametrize('changes, flag, texts', [r[1:] for r in RULES],
                         ids=[r[0] for r in RULES])
def test_rule_raises_config_error_naming_the_flag(valid, changes, flag, texts):
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, **changes))
  message = str(error.value)
  assert '\n' not in message
  # Paths hold the test's name (tmp_path): they must not be what names the flag.
  bare = message.replace(valid.train_dir, 'TRAIN_DIR').replace(valid.dataset_dir, 'DATA')
  assert names_flag(bare, flag), message
  for text in texts:
    assert text in bare, message


def test_unknown_optimizer_lists_every_valid_name_sorted(valid):
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, optimizer='adamw'))
  assert str(error.value).endswith('valid: ' + ', '.join(VALID_OPTIMIZERS))


def test_missing_dataset_dir_is_reported(valid, tmp_path):
  missing = str(tmp_path / 'no_such_dir')
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, dataset_dir=missing))
  message = str(error.value)
  assert missing in message
  assert names_flag(message.replace(missing, 'DIR'), 'dataset_dir'), message
  assert ('python -m datasets.convert_images --dataset_name=digits --output_dir=%s'
          % missing) in message


def _empty_dataset_dir_error(valid, tmp_path):
  """The message for an existing directory that holds no conversion, and that directory."""
  empty = tmp_path / 'empty'
  empty.mkdir()
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, dataset_dir=str(empty)))
  return str(error.value), str(empty)


def test_dataset_dir_without_converted_data_names_the_convert_command(valid, tmp_path):
  message, empty = _empty_dataset_dir_error(valid, tmp_path)
  assert '\n' not in message
  assert empty in message
  assert ('python -m datasets.convert_images --dataset_name=digits --output_dir=%s'
          % empty) in message


def test_dataset_dir_without_converted_data_names_the_flag(valid, tmp_path):
  message, empty = _empty_dataset_dir_error(valid, tmp_path)
  # setup.py: every message names the flag (the path itself holds this test's name).
  assert names_flag(message.replace(empty, 'DIR'), 'dataset_dir'), message


@pytest.mark.parametrize('suffix', ['model.ckpt-123', 'no_such_dir/'])
def test_checkpoint_path_that_does_not_exist(valid, tmp_path, suffix):
  path = str(tmp_path / suffix)
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, checkpoint_path=path))
  message = str(error.value)
  assert '--checkpoint_path' in message and path in message


def test_checkpoint_directory_without_checkpoint(valid, tmp_path):
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, checkpoint_path=str(tmp_path)))
  assert '--checkpoint_path' in str(error.value)


@pytest.mark.parametrize('mode', ['statistics', 'all'])
def test_frozen_batch_norm_reaches_the_network(valid, mode):
  setup = check_train_config(dataclasses.replace(valid, use_batch_norm=True,
                                                 freeze_batch_norm=mode))
  assert setup.network.net_kwargs == {'use_batch_norm': True, 'freeze_batch_norm': mode}
  assert 'freeze_batch_norm' not in check_train_config(valid).network.net_kwargs


def test_labels_offset_below_num_classes_is_accepted(valid):
  assert check_train_config(dataclasses.replace(valid, labels_offset=9)).dataset.num_classes \
      == 10


@pytest.mark.parametrize('changes', [
    dict(learning_rate_decay_type='piecewise', learning_rate_boundaries=(100, 200),
         learning_rate_values=(0.1, 0.01, 0.001)),
    dict(learning_rate_decay_type='cosine', max_number_of_steps=100),
    dict(learning_rate_decay_type='fixed', num_epochs_per_decay=0.0),
    dict(learning_rate_decay_type='polynomial'),
    dict(optimizer='ftrl'),
    dict(moving_average_decay=0.9999, label_smoothing=0.1, gpu_memory_fraction=1.0),
], ids=['piecewise', 'cosine', 'fixed', 'polynomial', 'ftrl', 'edges'])
def test_valid_variants_are_accepted(valid, changes):
  check_train_config(dataclasses.replace(valid, **changes))


def test_several_clones_without_gpus_are_refused_unless_on_cpu(valid):
  """This machine has no GPU: 2 clones would both run on the CPU by soft placement while
  the run said GPU. --clone_on_cpu (logical CPU devices) or 1 clone is accepted."""
  assert not tf.config.list_physical_devices('GPU')
  with pytest.raises(ConfigError) as error:
    check_train_config(dataclasses.replace(valid, num_clones=2))
  assert str(error.value) == (
      '--num_clones=2 needs 2 GPUs, but TensorFlow sees 0 on this machine; add '
      '--clone_on_cpu to run the clones on logical CPU devices, or use --num_clones=1')
  check_train_config(dataclasses.replace(valid, num_clones=2, clone_on_cpu=True))
  check_train_config(dataclasses.replace(valid, num_clones=1))


def test_as_many_clones_as_gpus_are_accepted(valid):
  from training import setup as setup_module  # pylint: disable=import-outside-toplevel
  setup_module._check_gpus_for_clones(dataclasses.replace(valid, num_clones=4), 4)  # pylint: disable=protected-access
  with pytest.raises(ConfigError, match='needs 4 GPUs, but TensorFlow sees 2'):
    setup_module._check_gpus_for_clones(dataclasses.replace(valid, num_clones=4), 2)  # pylint: disable=protected-access


def test_more_workers_than_shard_files_is_refused_before_any_graph(valid, digits_dir):
  files = len(tf.io.gfile.glob(os.path.join(digits_dir, 'train-*')))
  assert files >= 1
  with pytest.raises(ConfigError, match=r'^--worker_replicas=%d: num_shards=%d input shards '
                                        r'\(one per worker\) need at least as many files.*'
                                        r'--num_shards>=%d or use fewer workers$'
                                        % (files + 1, files + 1, files + 1)):
    check_train_config(dataclasses.replace(valid, worker_replicas=files + 1, num_ps_tasks=1,
                                           replicas_to_aggregate=1))


def test_the_summary_cadence_defaults_to_the_progress_cadence(valid):
  assert check_train_config(dataclasses.replace(
      valid, log_every_n_steps=7)).save_summaries_steps == 7
  assert check_train_config(dataclasses.replace(
      valid, log_every_n_steps=7, save_summaries_steps=0)).save_summaries_steps == 0
  check_train_config(dataclasses.replace(valid, use_batch_norm=True, precise_bn_batches=5))


def test_a_data_service_run_shares_one_job_and_leaves_the_sharding_to_the_service(valid):
  """Every trainer of the run builds the same pipeline (no shard of its own) and names the
  same job, so a cluster's workers (and a restarted one) share each epoch."""
  config = dataclasses.replace(valid, data_service_address='dispatcher-0:5050',
                               worker_replicas=2, task=1, num_ps_tasks=1)
  settings = check_train_config(config).input_settings
  assert (settings.num_shards, settings.shard_index) == (1, 0)
  assert settings.service.address == 'dispatcher-0:5050'
  assert settings.service.sharding == 'dynamic'
  assert settings.service.job_name == 'train ' + os.path.abspath(valid.train_dir)
  assert check_train_config(valid).input_settings.service is None


def test_a_stop_in_epochs_is_steps_of_the_global_batch(valid):
  # 1437 train digits; a global batch of 32 x 2 clones = 64: 3 epochs = ceil(67.4) steps.
  setup = check_train_config(dataclasses.replace(valid, max_number_of_epochs=3.0,
                                                 num_clones=2, clone_on_cpu=True))
  assert setup.config.max_number_of_steps == 68
  # Half the clones, the same epochs: twice the steps.
  setup = check_train_config(dataclasses.replace(valid, max_number_of_epochs=3.0))
  assert setup.config.max_number_of_steps == 135
  # A replayed flags.cfg holds both, in agreement; disagreeing they are one line.
  check_train_config(dataclasses.replace(valid, max_number_of_epochs=3.0,
                                         max_number_of_steps=135))
  with pytest.raises(ConfigError, match=r'^--max_number_of_steps=100 and '
                     r'--max_number_of_epochs=3 \(135 steps of a global batch of 32\) '
                     r'disagree; give one$'):
    check_train_config(dataclasses.replace(valid, max_number_of_epochs=3.0,
                                           max_number_of_steps=100))
  with pytest.raises(ConfigError, match=r'--max_number_of_epochs=0.0 must be > 0'):
    check_train_config(dataclasses.replace(valid, max_number_of_epochs=0.0))
