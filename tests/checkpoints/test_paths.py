"""checkpoints.paths: a checkpoint named by prefix, file or directory; a train_dir's latest."""

import os

import numpy as np
import pytest

from checkpoints import paths
from core.params import ConfigError
from tests import video_testdata as vt


@pytest.fixture(scope='module')
def lenet10(tmp_path_factory):
  """(prefix, values) of a small checkpoint (the name is kept from the restore tests)."""
  values = {'v': np.arange(4, dtype=np.float32)}
  directory = tmp_path_factory.mktemp('ckpt')
  return vt.write_checkpoint(str(directory / 'model.ckpt-7'), values), values


def test_checkpoint_step_is_the_prefix_number():
  assert paths.checkpoint_step('/a/model.ckpt-120') == 120
  assert paths.checkpoint_step('/a/model.ckpt') is None


def test_resolve_checkpoint_accepts_a_prefix(lenet10):
  prefix, _ = lenet10
  assert paths.resolve_checkpoint(prefix) == prefix


def test_resolve_checkpoint_of_a_directory_is_its_latest(tmp_path):
  values = {'v': np.arange(3, dtype=np.float32)}
  vt.write_checkpoint(str(tmp_path / 'model.ckpt-1'), values)
  latest = vt.write_checkpoint(str(tmp_path / 'model.ckpt-12'), values)
  assert latest.endswith('model.ckpt-12')
  resolved = paths.resolve_checkpoint(str(tmp_path))
  assert os.path.abspath(resolved) == os.path.abspath(latest)


def test_resolve_checkpoint_missing_path_is_a_config_error(tmp_path):
  missing = str(tmp_path / 'nope' / 'model.ckpt-5')
  with pytest.raises(ConfigError) as error:
    paths.resolve_checkpoint(missing)
  assert missing in str(error.value) and '--checkpoint_path' in str(error.value)
  with pytest.raises(ConfigError, match='--other_flag'):
    paths.resolve_checkpoint(missing, flag='other_flag')


def test_resolve_checkpoint_empty_directory_is_a_config_error(tmp_path):
  with pytest.raises(ConfigError, match='holds no checkpoint'):
    paths.resolve_checkpoint(str(tmp_path))


@pytest.mark.parametrize('suffix', ['.index', '.data-00000-of-00001'])
def test_resolve_checkpoint_given_a_checkpoint_file_gives_its_prefix(lenet10, suffix):
  """Users often pass model.ckpt-N.index (or .data-...); the prefix is meant.

  Either that file is resolved to its prefix, or it is refused with a ConfigError; it
  must not reach the checkpoint reader as a "prefix" (a DataLossError traceback for
  .data, "no model variable would be restored" for .index).
  """
  prefix, _ = lenet10
  try:
    resolved = paths.resolve_checkpoint(prefix + suffix)
  except ConfigError:
    return
  assert resolved == prefix


def test_train_dir_checkpoint(tmp_path):
  assert paths.latest_checkpoint(None) is None
  assert paths.latest_checkpoint(str(tmp_path / 'absent')) is None
  assert paths.latest_checkpoint(str(tmp_path)) is None
  latest = vt.write_checkpoint(str(tmp_path / 'model.ckpt-4'), {'v': np.zeros(2, np.float32)})
  assert paths.latest_checkpoint(str(tmp_path)) == latest
