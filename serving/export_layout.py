"""The directory layout TF Serving loads: numbered versions under one base directory.

    BASE/                     export.py's --export_dir, the model server's --model_base_path
      1/
      2/                      the highest number is the version served by default
        saved_model.pb
        variables/
        assets.extra/         files TensorFlow does not read (TF Serving's convention)
          labels.txt
          model_info.json
      .tmp-3-4711/            a version being written: not all digits, so the server ignores it

A version is written under a temporary name inside BASE and renamed into place when it is
complete (one rename on one file system), so a model server watching BASE never loads half
a version, and a failed export leaves no numbered directory. A served version is never
overwritten.
"""

import contextlib
import os
import re
import shutil

from core.params import ConfigError

__all__ = ['ASSETS_EXTRA', 'versions', 'choose_version', 'staged_version',
           'find_version_dir', 'holds_saved_model']

ASSETS_EXTRA = 'assets.extra'
_SAVED_MODEL_FILES = ('saved_model.pb', 'saved_model.pbtxt')
_VERSION_NAME = re.compile(r'[0-9]+\Z')   # what TF Serving reads as a version


def holds_saved_model(directory):
  return any(os.path.isfile(os.path.join(directory, name)) for name in _SAVED_MODEL_FILES)


def versions(base_dir):
  """{version number: entry name} of base_dir's all-digit entries; {} for a missing base."""
  if not os.path.isdir(base_dir):
    return {}
  return {int(name): name for name in os.listdir(base_dir) if _VERSION_NAME.match(name)}


def choose_version(base_dir, requested=None):
  """The version export writes: `requested`, else one more than the highest in base_dir
  (1 for a new base). Raises ConfigError for a base that cannot hold versions or a
  version that is taken."""
  if os.path.exists(base_dir) and not os.path.isdir(base_dir):
    raise ConfigError('--export_dir=%s is a file; give a directory for the model\'s '
                      'numbered versions' % base_dir)
  if holds_saved_model(base_dir):
    raise ConfigError('--export_dir=%s holds a SavedModel itself; give the base directory '
                      'that holds (or will hold) the numbered versions' % base_dir)
  taken = versions(base_dir)
  following = max(taken, default=0) + 1
  if requested is None:
    return following
  if requested < 1:
    raise ConfigError('--export_version=%d: a version is a positive integer; give one '
                      '>= 1, or leave it unset for %d' % (requested, following))
  if requested in taken:
    raise ConfigError('--export_version=%d: %s already exists and a served version is '
                      'never overwritten; give a number not taken, or leave it unset for %d'
                      % (requested, os.path.join(base_dir, taken[requested]), following))
  return requested


def _remove_abandoned_staging(base_dir):
  """Removes the .tmp-<version>-<pid> directories of exports that were killed (their
  process no longer exists); a running export's directory stays."""
  for name in os.listdir(base_dir):
    match = re.fullmatch(r'\.tmp-\d+-(\d+)', name)
    if not match or int(match.group(1)) == os.getpid():
      continue
    try:
      os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
      shutil.rmtree(os.path.join(base_dir, name), ignore_errors=True)
    except PermissionError:   # alive, owned by someone else
      pass


@contextlib.contextmanager
def staged_version(base_dir, version):
  """Yields an empty temporary directory inside base_dir (created if missing) to write
  the version into; renames it to base_dir/<version> when the block ends. When the block
  raises, the temporary directory goes (and base_dir too if this created it and it is
  empty), and the error propagates."""
  created = not os.path.isdir(base_dir)
  os.makedirs(base_dir, exist_ok=True)
  _remove_abandoned_staging(base_dir)
  staging = os.path.join(base_dir, '.tmp-%d-%d' % (version, os.getpid()))
  if os.path.exists(staging):   # left by a killed process that had this pid
    shutil.rmtree(staging)
  os.mkdir(staging)
  try:
    yield staging
    final = os.path.join(base_dir, str(version))
    if version in versions(base_dir):
      raise ConfigError('--export_dir=%s: version %d appeared while exporting (another '
                        'export?); nothing was written, run again' % (base_dir, version))
    os.rename(staging, final)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    if created and not os.listdir(base_dir):
      os.rmdir(base_dir)
    raise


def find_version_dir(model_dir):
  """The SavedModel directory for --model_dir: model_dir itself when it holds one (a
  version directory), else its highest numbered version (a base, as TF Serving serves it).

  Raises:
    ConfigError: neither holds a SavedModel.
  """
  if holds_saved_model(model_dir):
    return model_dir
  numbered = versions(model_dir)
  if not numbered:
    raise ConfigError('--model_dir=%s holds neither saved_model.pb nor numbered versions '
                      '(<model_dir>/<version>/saved_model.pb); give the --export_dir of '
                      'export.py or one version in it' % model_dir)
  version_dir = os.path.join(model_dir, numbered[max(numbered)])
  if not holds_saved_model(version_dir):
    raise ConfigError('--model_dir=%s: its highest version %s holds no saved_model.pb; '
                      'give a version directory that does' % (model_dir, version_dir))
  return version_dir
