"""The trainer with --variable_update=replicated (deployment/replicated.py) in one process:
the checkpoint holds one copy under today's names, a checkpoint moves both ways between
the variable updates (and a resume syncs the copies from the restored values), eval reads
both, and precise batch norm and the start-up line know the copies.

The resume comparisons run the same seeded, deterministic continuation from one
checkpoint under both variable updates: clones draw their batches in a fixed order, so
both sum the same gradients of the same batches, in another order (round-off only). A
copy left at its own random start after a restore gives clone 1 another model, whose
gradient moves the weights by the order of the update itself.
"""

import logging

import numpy as np
import pytest

from evaluation import run
from evaluation.config import EvalConfig
from tf_compat import tf
from training.train import train
from tests.training.lenet_runs import LENET_VARIABLES, make_config

pytestmark = pytest.mark.slow

def config(digits_dir, train_dir, **overrides):
  """lenet_runs.make_config's 2-clone LeNet, seeded and deterministic, momentum, 6 steps."""
  values = dict(max_number_of_steps=6, optimizer='momentum', learning_rate=0.05, batch_size=8,
                log_every_n_steps=3, random_seed=5, deterministic=True, dropout_keep_prob=1.0)
  values.update(overrides)
  return make_config(digits_dir, train_dir, **values)


def entries(checkpoint):
  return dict(tf.train.list_variables(checkpoint))


def values(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name) for name in LENET_VARIABLES}


class _Lines(logging.Handler):
  def __init__(self):
    super().__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    self.lines.append(record.getMessage())


@pytest.fixture(scope='module')
def runs_and_lines(digits_dir, tmp_path_factory):
  """6 steps under each variable update, the same seed (replicated in 3 gradient packs,
  which only round-off tells from 1); the absl lines of the replicated run."""
  root = tmp_path_factory.mktemp('replicated')
  absl_logger, lines = logging.getLogger('absl'), _Lines()
  level = absl_logger.level
  absl_logger.setLevel(logging.INFO)
  absl_logger.addHandler(lines)
  try:
    replicated = train(config(digits_dir, root / 'replicated', variable_update='replicated',
                              gradient_repacking=3))
  finally:
    absl_logger.removeHandler(lines)
    absl_logger.setLevel(level)
  shared = train(config(digits_dir, root / 'parameter_server',
                        variable_update='parameter_server'))
  return {'replicated': replicated, 'parameter_server': shared}, lines.lines


@pytest.fixture(scope='module')
def runs(runs_and_lines):
  return runs_and_lines[0]


def test_the_checkpoint_holds_one_copy_under_todays_names(runs):
  replicated, shared = (entries(runs[u].checkpoint) for u in ('replicated',
                                                                 'parameter_server'))
  assert runs['replicated'].global_step == 6
  assert not [name for name in replicated if name.startswith('clone_')]
  model = {name: shape for name, shape in replicated.items()
           if not name.startswith('input_position')}
  assert model == {name: shape for name, shape in shared.items()
                   if not name.startswith('input_position')}
  assert set(LENET_VARIABLES) <= set(model)
  assert 'LeNet/fc4/weights/Momentum' in model


def _continue(digits_dir, tmp_path, checkpoint_run, update):
  """Copies the run's train_dir and trains it 3 more steps under `update`."""
  import shutil  # pylint: disable=import-outside-toplevel
  source = checkpoint_run.checkpoint.rsplit('/', 1)[0]
  target = tmp_path / update
  shutil.copytree(source, target)
  result = train(config(digits_dir, target, variable_update=update, max_number_of_steps=9))
  assert result.global_step == 9
  return values(result.checkpoint)


@pytest.mark.parametrize('trained_under', ['replicated', 'parameter_server'])
def test_a_checkpoint_resumes_under_either_variable_update_alike(runs, digits_dir, tmp_path,
                                                                 trained_under):
  start = values(runs[trained_under].checkpoint)
  shared = _continue(digits_dir, tmp_path, runs[trained_under], 'parameter_server')
  copies = _continue(digits_dir, tmp_path, runs[trained_under], 'replicated')
  for name in LENET_VARIABLES:
    movement = np.abs(shared[name] - start[name]).max()
    assert movement > 1e-4, name
    assert np.abs(copies[name] - shared[name]).max() <= 1e-3 * movement + 1e-7, name


def test_eval_reads_a_replicated_checkpoint_as_any_other(runs, digits_dir):
  accuracies = {}
  for update, result in runs.items():
    [outcome] = list(run.evaluations(EvalConfig(
        dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
        checkpoint_path=result.checkpoint, num_preprocessing_threads=1)))
    accuracies[update] = outcome.result.accuracy
  assert accuracies['replicated'] == pytest.approx(accuracies['parameter_server'], abs=0.02)


def test_the_start_up_line_says_which_variable_update_runs(runs_and_lines):
  """The replicated run of `runs` (--gradient_repacking=3)."""
  _, lines = runs_and_lines
  assert any('replicated: a copy per clone, gradients all-reduced over 2 clone(s) of 1 '
             'worker(s) in 3 pack(s)' in line for line in lines), lines


def test_precise_batch_norm_counts_every_clones_batch_into_clone_0s_statistics(
    digits_dir, tmp_path, caplog):
  caplog.set_level(logging.INFO, logger='absl')
  result = train(config(digits_dir, tmp_path / 'bn', variable_update='replicated',
                        use_batch_norm=True, precise_bn_batches=2, max_number_of_steps=2,
                        deterministic=False))
  assert ('moving mean and variance of 3 layers recomputed with the final weights over 2 '
          'training batches of 16 examples') in caplog.text
  assert not [name for name, _ in tf.train.list_variables(result.checkpoint)
              if name.startswith('clone_')]


def test_a_fine_tune_restores_clone_0_and_the_sync_reaches_every_copy(runs, digits_dir,
                                                                       tmp_path):
  """--checkpoint_path (the init_fn path DeepMind's I3D checkpoints and inflation take)
  under both variable updates from the same checkpoint: alike to round-off; a copy left at
  its random start would give clone 1 another model."""
  start = values(runs['parameter_server'].checkpoint)
  ends = {}
  for update in ('parameter_server', 'replicated'):
    ends[update] = values(train(config(
        digits_dir, tmp_path / update, variable_update=update, max_number_of_steps=3,
        checkpoint_path=runs['parameter_server'].checkpoint)).checkpoint)
  for name in LENET_VARIABLES:
    movement = np.abs(ends['parameter_server'][name] - start[name]).max()
    assert movement > 1e-4, name
    assert np.abs(ends['replicated'][name] - ends['parameter_server'][name]).max() <= (
        1e-3 * movement + 1e-7), name


def test_replicas_to_aggregate_is_not_read_when_workers_all_reduce(digits_dir, tmp_path):
  """A recipe including a synchronous one's --replicas_to_aggregate=10 runs replicated on
  fewer workers (the flag aggregates nothing there)."""
  from training.setup import check_train_config  # pylint: disable=import-outside-toplevel
  setup = check_train_config(config(digits_dir, tmp_path, variable_update='replicated',
                                    replicas_to_aggregate=10))
  assert setup.global_batch == 16
