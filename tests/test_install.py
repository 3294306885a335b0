"""The runtime requirements alone make a working install (issue 11).

A fresh virtualenv gets what a user on the CPU route runs, and nothing from
requirements-test.txt:

    pip install --upgrade pip -c constraints.txt      # as `make setup` does
    pip install -r requirements.txt                   # names its lock itself
    pip install --no-deps -r requirements-tfkeras.txt

Then `make demo`'s first command (the digits conversion) and the local launcher's
`--help` must run from the repository root, and every installed package must be pinned
in constraints.txt at the installed version (the lock leaves nothing to chance).

With pip's cache the three tests take 1 to 2 minutes on 2 busy cores: the install about
30 s, the conversion 10 to 15 s, removing the 1.9 GB venv 10 to 60 s (this disk is
mounted with discard, and other work shares it). They need the package index; without
it they fail and say so (a machine that cannot install the requirements cannot run the
project).
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL_TIMEOUT_SECS = 600
RUN_TIMEOUT_SECS = 300


def child_env():
  """The caller's environment without what would let the children see our packages, and
  without PYTHONDONTWRITEBYTECODE: the venv is installed without bytecode (pip_install), so
  the first child writes that of the modules it imports and the others read it (with the
  variable set, each of the four that import TensorFlow compiled it again: 7.4 CPU-seconds
  an import against 2.9)."""
  env = {key: value for key, value in os.environ.items()
         if key not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV', 'PYTHONSTARTUP',
                        'PYTHONDONTWRITEBYTECODE')}
  env['PYTHONNOUSERSITE'] = '1'
  env['PIP_DISABLE_PIP_VERSION_CHECK'] = '1'
  return env


def run(argv, timeout):
  return subprocess.run(argv, cwd=ROOT, env=child_env(), capture_output=True, text=True,
                        timeout=timeout, check=False)


def pip_install(python, *args):
  """pip install ARGS into the venv; fails the test with pip's own last lines.

  --no-compile: what is installed is the same, and skipping the ~10,000 .pyc files
  halves both the install and the removal of the venv here (the modules the children
  import are compiled when first imported: child_env).
  """
  result = run([python, '-m', 'pip', 'install', '--quiet', '--no-compile'] + list(args),
               INSTALL_TIMEOUT_SECS)
  if result.returncode != 0:
    tail = '\n'.join((result.stdout + result.stderr).strip().splitlines()[-15:])
    pytest.fail('`pip install %s` failed with status %d in a fresh venv: %s\n%s'
                % (' '.join(args), result.returncode, index_diagnosis(python), tail))


def index_diagnosis(python):
  """Whether pip reaches the package index at all (pip says 'no matching distribution'
  both when it cannot and when a pin does not exist)."""
  probe = run([python, '-m', 'pip', 'index', 'versions', 'pip'], 120)
  if probe.returncode != 0:
    return ('pip cannot reach the package index (`pip index versions pip` fails too); this '
            'machine has no access to it, so the install cannot be tested here.')
  return 'the package index answers, so the requirements or the lock are wrong.'


def canonical(name):
  return re.sub(r'[-_.]+', '-', name).lower()


def pins(lines):
  """{canonical name: version} of the `name==version` lines (pip freeze, constraints)."""
  found = {}
  for line in lines:
    if '==' in line and not line.startswith('#'):
      name, version = line.strip().split('==')
      found[canonical(name)] = version
  return found


@pytest.fixture(scope='module')
def runtime_venv(tmp_path_factory):
  """A fresh venv with only the runtime requirements; yields (python, install seconds)."""
  venv = str(tmp_path_factory.mktemp('runtime-venv'))
  python = os.path.join(venv, 'bin', 'python')
  start = time.monotonic()
  try:
    created = run([sys.executable, '-m', 'venv', '--clear', venv], 120)
    assert created.returncode == 0, created.stderr
    pip_install(python, '--upgrade', 'pip', '-c', 'constraints.txt')
    pip_install(python, '-r', 'requirements.txt')
    pip_install(python, '--no-deps', '-r', 'requirements-tfkeras.txt')
    yield python, time.monotonic() - start
  finally:
    # About 1.5 GB that pytest would keep 3 of. Removed by a process of its own: the
    # removal took 71 s of this worker's time in a loaded parallel run, and nothing here
    # reads the venv afterwards.
    subprocess.Popen(['rm', '-rf', venv], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_runtime_install_is_all_locked_and_has_no_test_tools(runtime_venv):
  python, install_secs = runtime_venv
  print('fresh runtime install: %.0f s' % install_secs)
  frozen = run([python, '-m', 'pip', 'freeze', '--all'], 120)
  assert frozen.returncode == 0, frozen.stderr
  installed = pins(frozen.stdout.splitlines())
  with open(os.path.join(ROOT, 'constraints.txt')) as lock:
    locked = pins(lock)
  unpinned = {name: version for name, version in installed.items()
              if locked.get(name) != version}
  assert not unpinned, 'installed but not pinned at that version in constraints.txt: %s' % (
      unpinned)
  for test_only in ('pytest', 'pytest-timeout', 'scikit-video', 'ruff'):
    assert test_only not in installed, '%s came with the runtime requirements' % test_only


@pytest.mark.slow
def test_runtime_install_converts_digits(runtime_venv, tmp_path):
  python, _ = runtime_venv
  output_dir = str(tmp_path / 'digits')
  result = run([python, '-m', 'datasets.convert_images', '--dataset_name=digits',
                '--output_dir=' + output_dir], RUN_TIMEOUT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  with open(os.path.join(output_dir, 'dataset_info.json')) as info:
    assert json.load(info)  # written last, after the shards


@pytest.mark.slow
def test_runtime_install_runs_the_launcher(runtime_venv):
  python, _ = runtime_venv
  result = run([python, '-m', 'deployment.launch_local', '--help'], RUN_TIMEOUT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  for flag in ('--num_ps', '--isolation'):
    assert flag in result.stdout, '%s missing from the launcher --help:\n%s' % (
        flag, result.stdout)


def test_make_setup_builds_the_clip_pipelines_op():
  # A prerequisite named by a variable defined below its rule expands to nothing: a fresh
  # clone's `make setup` then skipped the op and CI's collection failed on its import.
  # `setup` makes the venv, then `setup-parts` (the op and the bytecode, as two jobs).
  database = run(['make', '--no-print-directory', '-n', '-p', 'setup'], RUN_TIMEOUT_SECS)
  rules = [line.split() for line in database.stdout.splitlines()
           if line.startswith('setup-parts:')]
  assert rules and {'datasets/inputs/ops/jpeg_windows.so',
                    '.venv/.bytecode-stamp'} <= set(rules[0]), rules


def test_make_test_lints_first_with_the_locked_ruff():
  # CI runs `make test`: the linter (rules in ruff.toml) comes before the op's build and the
  # tests, from the venv that requirements-test.txt fills under the lock.
  database = run(['make', '--no-print-directory', '-n', '-p', 'test'], RUN_TIMEOUT_SECS)
  rules = [line.split() for line in database.stdout.splitlines()
           if line.startswith('test:') and '=' not in line]
  assert rules and rules[0][1:3] == ['lint', 'setup'], rules
  assert '.venv/bin/ruff check --no-cache .' in database.stdout, database.stdout[-2000:]
  with open(os.path.join(ROOT, 'requirements-test.txt')) as requirements:
    wanted = pins(requirements)
  with open(os.path.join(ROOT, 'constraints.txt')) as lock:
    assert pins(lock)['ruff'] == wanted['ruff']
  assert os.path.exists(os.path.join(ROOT, 'ruff.toml'))


@pytest.mark.slow
def test_runtime_install_runs_the_clip_pipelines_op(runtime_venv):
  # `make jpeg-op` with the fresh venv's Python (built already when `make test` set up
  # .venv: the same pinned TensorFlow), then a window decoded in that venv.
  python, _ = runtime_venv
  built = run(['make', '--no-print-directory', 'jpeg-op', 'PY=' + python], RUN_TIMEOUT_SECS)
  assert built.returncode == 0, built.stdout + built.stderr
  script = ('from datasets.inputs import jpeg_windows\n'
            'from tf_compat import tf\n'
            'jpeg = tf.io.encode_jpeg(tf.cast(tf.random.stateless_uniform([40, 48, 3], [1, 2],'
            ' maxval=256, dtype=tf.int32), tf.uint8))\n'
            'windows, status = jpeg_windows.decode_windows(tf.stack([jpeg]), [40, 48], [3, 5],'
            ' 32)\n'
            'whole = tf.io.decode_jpeg(jpeg, dct_method="INTEGER_ACCURATE")\n'
            'same = tf.reduce_all(tf.equal(windows[0], whole[3:35, 5:37]))\n'
            'print("status %d, same %s" % tuple(tf.compat.v1.Session().run([status[0], same])))\n')
  result = run([python, '-c', script], RUN_TIMEOUT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  assert result.stdout.strip().splitlines()[-1] == 'status 0, same True', result.stdout
