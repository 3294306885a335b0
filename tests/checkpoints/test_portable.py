"""A training directory moved or copied to another path resumes and evaluates from its own
files, including one written by an older run whose state file holds absolute paths."""

import os
import shutil

import pytest

from checkpoints import paths
from evaluation.image_eval import EvalConfig
from evaluation import run
from tests.training.lenet_runs import make_config, train_with_timeout
from tf_compat import tf


def _make_state_absolute(train_dir):
  """What runs before relative paths wrote: the state names absolute paths."""
  state = tf.train.get_checkpoint_state(train_dir)
  absolute = lambda p: os.path.join(train_dir, os.path.basename(p))
  tf.train.update_checkpoint_state(
      train_dir, absolute(state.model_checkpoint_path),
      [absolute(p) for p in state.all_model_checkpoint_paths])
  with open(os.path.join(train_dir, 'checkpoint')) as handle:
    assert '"%s/' % train_dir in handle.read()


def test_a_run_writes_relative_paths(digits_dir, tmp_path):
  train_with_timeout(make_config(digits_dir, tmp_path / 'run', max_number_of_steps=3))
  with open(str(tmp_path / 'run' / 'checkpoint')) as handle:
    text = handle.read()
  assert 'model_checkpoint_path: "model.ckpt-3"' in text and str(tmp_path) not in text


@pytest.mark.slow
@pytest.mark.parametrize('original_kept', [True, False])
def test_an_old_run_copied_or_moved_resumes_and_evaluates_from_the_copy(
    digits_dir, tmp_path, original_kept):
  original, copy = str(tmp_path / 'original'), str(tmp_path / 'copy')
  train_with_timeout(make_config(digits_dir, original, max_number_of_steps=4))
  _make_state_absolute(original)
  shutil.copytree(original, copy)
  if original_kept:
    # The original goes on (here: its checkpoint is spoiled); the copy must not notice.
    for name in os.listdir(original):
      if name.startswith('model.ckpt-4.data'):
        with open(os.path.join(original, name), 'wb') as handle:
          handle.write(b'not a checkpoint')
  else:
    shutil.rmtree(original)
  assert paths.latest_checkpoint(copy) == os.path.join(copy, 'model.ckpt-4')
  assert paths.listed_checkpoints(copy)[-1] == os.path.join(copy, 'model.ckpt-4')
  result = train_with_timeout(make_config(digits_dir, copy, max_number_of_steps=6))
  assert result.global_step == 6 and result.checkpoint == os.path.join(copy, 'model.ckpt-6')
  with open(os.path.join(copy, 'checkpoint')) as handle:
    assert original not in handle.read()
  evaluated = list(run.evaluations(EvalConfig(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      checkpoint_path=copy)))
  assert evaluated[0].result.global_step == 6


def test_only_a_state_with_other_paths_is_rewritten(tmp_path):
  train_dir = str(tmp_path)
  tf.train.update_checkpoint_state(train_dir, 'model.ckpt-2', ['model.ckpt-1', 'model.ckpt-2'])
  before = os.path.getmtime(os.path.join(train_dir, 'checkpoint'))
  assert not paths.make_state_relative(train_dir)   # relative already: left as it is
  assert os.path.getmtime(os.path.join(train_dir, 'checkpoint')) == before
  tf.train.update_checkpoint_state(train_dir, '/elsewhere/model.ckpt-2',
                                   ['/elsewhere/model.ckpt-1', '/elsewhere/model.ckpt-2'])
  assert paths.make_state_relative(train_dir)
  with open(os.path.join(train_dir, 'checkpoint')) as handle:
    text = handle.read()
  assert 'model_checkpoint_path: "model.ckpt-2"' in text and '/elsewhere' not in text
  assert not paths.make_state_relative(train_dir)
  assert not paths.make_state_relative(str(tmp_path / 'none'))   # no state file
