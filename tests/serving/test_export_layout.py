"""serving.export_layout: numbered versions as TF Serving reads them, written whole."""

import os
import subprocess

import pytest

from core.params import ConfigError
from serving import export_layout


def make_version(base, name):
  directory = base / name
  directory.mkdir(parents=True)
  (directory / 'saved_model.pb').write_bytes(b'')
  return directory


def assert_one_line(error, *texts):
  message = str(error.value)
  assert '\n' not in message, message
  for text in texts:
    assert text in message, message


def test_versions_are_the_all_digit_entries(tmp_path):
  for name in ('1', '9', '10', '007', '.tmp-11-42', 'notes', '12abc', '-3'):
    (tmp_path / name).mkdir()
  assert export_layout.versions(str(tmp_path)) == {1: '1', 9: '9', 10: '10', 7: '007'}
  assert export_layout.versions(str(tmp_path / 'missing')) == {}


def test_the_next_version_follows_the_highest(tmp_path):
  base = tmp_path / 'models'
  assert export_layout.choose_version(str(base)) == 1            # a new base
  base.mkdir()
  (base / 'notes.txt').write_text('')
  (base / '.tmp-4-100').mkdir()                                  # a killed export
  assert export_layout.choose_version(str(base)) == 1
  make_version(base, '1')
  make_version(base, '3')
  assert export_layout.choose_version(str(base)) == 4
  assert export_layout.choose_version(str(base), 2) == 2         # a gap is free


@pytest.mark.parametrize('requested,texts', [
    (3, ['--export_version=3: ', os.path.join('models', '3') + ' already exists',
         'never overwritten', 'unset for 4']),
    (0, ['--export_version=0: a version is a positive integer', '>= 1', 'unset for 4']),
])
def test_a_version_that_cannot_be_written_is_refused(tmp_path, requested, texts):
  make_version(tmp_path / 'models', '3')
  with pytest.raises(ConfigError) as error:
    export_layout.choose_version(str(tmp_path / 'models'), requested)
  assert_one_line(error, *texts)


def test_a_base_that_cannot_hold_versions_is_refused(tmp_path):
  (tmp_path / 'file').write_text('')
  with pytest.raises(ConfigError) as error:
    export_layout.choose_version(str(tmp_path / 'file'))
  assert_one_line(error, '--export_dir=%s is a file' % (tmp_path / 'file'))
  make_version(tmp_path, 'old')   # the layout before versions: a SavedModel in the base
  with pytest.raises(ConfigError) as error:
    export_layout.choose_version(str(tmp_path / 'old'))
  assert_one_line(error, '--export_dir=%s holds a SavedModel itself' % (tmp_path / 'old'))


def test_a_staged_version_appears_only_when_complete(tmp_path):
  base = tmp_path / 'models'
  with export_layout.staged_version(str(base), 1) as staging:
    assert os.path.dirname(staging) == str(base)
    assert not os.path.basename(staging).isdigit() and os.listdir(staging) == []
    (tmp_path / 'models' / os.path.basename(staging) / 'saved_model.pb').write_bytes(b'x')
    assert export_layout.versions(str(base)) == {}
  assert os.listdir(str(base)) == ['1']
  assert os.listdir(str(base / '1')) == ['saved_model.pb']


def test_a_failed_version_leaves_nothing(tmp_path):
  base = tmp_path / 'models'
  with pytest.raises(RuntimeError, match='half written'):
    with export_layout.staged_version(str(base), 1) as staging:
      open(os.path.join(staging, 'saved_model.pb'), 'wb').close()
      raise RuntimeError('half written')
  assert not base.exists()                    # created by the failed export: removed
  make_version(base, '1')
  with pytest.raises(RuntimeError):
    with export_layout.staged_version(str(base), 2):
      raise RuntimeError('half written')
  assert os.listdir(str(base)) == ['1']       # there before: kept


def test_a_killed_exports_staging_goes_and_a_running_ones_stays(tmp_path):
  dead = subprocess.Popen(['true'])
  dead.wait()                                      # its pid no longer exists
  abandoned = tmp_path / ('.tmp-3-%d' % dead.pid)
  running = tmp_path / ('.tmp-4-%d' % os.getppid())   # a live process: pytest's parent
  abandoned.mkdir()
  running.mkdir()
  with export_layout.staged_version(str(tmp_path), 5) as staging:
    open(os.path.join(staging, 'saved_model.pb'), 'w').close()
  assert not abandoned.exists()
  assert running.exists() and (tmp_path / '5' / 'saved_model.pb').exists()


def test_a_version_taken_while_exporting_is_not_replaced(tmp_path):
  base = tmp_path / 'models'
  with pytest.raises(ConfigError) as error:
    with export_layout.staged_version(str(base), 1) as staging:
      open(os.path.join(staging, 'mine'), 'w').close()
      make_version(base, '1')                 # another export won the race
  assert_one_line(error, '--export_dir=%s: version 1 appeared while exporting' % base)
  assert os.listdir(str(base)) == ['1']
  assert os.listdir(str(base / '1')) == ['saved_model.pb']


def test_the_model_dir_is_a_base_or_a_version(tmp_path):
  base = tmp_path / 'models'
  make_version(base, '9')
  make_version(base, '10')                    # numerically highest, not by name
  (base / '.tmp-11-42').mkdir()
  assert export_layout.find_version_dir(str(base)) == str(base / '10')
  assert export_layout.find_version_dir(str(base / '9')) == str(base / '9')


def test_a_model_dir_without_a_saved_model(tmp_path):
  (tmp_path / 'notes').mkdir()
  with pytest.raises(ConfigError) as error:
    export_layout.find_version_dir(str(tmp_path))
  assert_one_line(error, '--model_dir=%s holds neither saved_model.pb nor numbered versions'
                  % tmp_path, '<model_dir>/<version>/saved_model.pb')
  (tmp_path / '3').mkdir()
  with pytest.raises(ConfigError) as error:
    export_layout.find_version_dir(str(tmp_path))
  assert_one_line(error, 'its highest version %s holds no saved_model.pb' % (tmp_path / '3'))
