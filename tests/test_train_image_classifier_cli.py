"""The entry scripts on a user mistake: exit status 2 and ONE line `error: ...` on stderr.

Each case is one real `python train_image_classifier.py ...` (or eval.py) process, the
module starts them all at once, a few in parallel, and each test reads its result. One case
of each script (`FRESH`) runs in the user's environment without the variables that hide
TensorFlow's notices, so it starts fresh (tests/prestarted.py) and its one line says that
the entry hides them itself; the others keep this environment and are forked (a fresh start
is about 5 s, all of it start-up).
Every training case also passes --max_number_of_steps=1 and a temporary --train_dir, so a
check that wrongly lets a case through trains one step instead of forever.
"""

import concurrent.futures
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRAIN = 'train_image_classifier.py'
EVAL = 'eval.py'
VALID = ['--dataset_name=digits', '--dataset_dir={data}', '--model_name=lenet',
         '--train_dir={tmp}/train', '--max_number_of_steps=1']


def without(flag_prefix):
  return [arg for arg in VALID if not arg.startswith(flag_prefix)]


# id: (script, argv after the script, texts the error line must hold)
CASES = {
    'negative_batch_size': (TRAIN, VALID + ['--batch_size=-1'], ['--batch_size=-1']),
    'unknown_optimizer': (TRAIN, VALID + ['--optimizer=adamw'],
                          ['--optimizer=adamw', 'momentum', 'sgd']),
    'missing_dataset_dir': (TRAIN, without('--dataset_dir'), ['--dataset_dir']),
    'replicas_to_aggregate_above_workers': (
        TRAIN, VALID + ['--replicas_to_aggregate=2', '--sync_replicas'],
        ['--replicas_to_aggregate=2', 'worker_replicas']),
    'unknown_model_name': (TRAIN, without('--model_name') + ['--model_name=resnet_v9'],
                           ['--model_name=resnet_v9', 'lenet']),
    'unknown_flag': (TRAIN, VALID + ['--num_clone=2'], ['num_clone']),
    'non_integer_value': (TRAIN, VALID + ['--batch_size=abc'], ['--batch_size=abc']),
    'positional_argument': (TRAIN, VALID + ['extra'], ['extra']),
    'eval_missing_checkpoint': (
        EVAL, ['--dataset_name=digits', '--dataset_dir={data}', '--model_name=lenet',
               '--checkpoint_path={tmp}/no_such_model.ckpt-5', '--eval_dir={tmp}/eval'],
        ['--checkpoint_path', 'no_such_model.ckpt-5']),
}


FRESH = ('negative_batch_size', 'eval_missing_checkpoint')


def quiet_env():
  """The user's environment minus anything that would hide or add TensorFlow noise."""
  env = dict(os.environ)
  for name in ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS'):
    env.pop(name, None)
  env['PYTHONPATH'] = ROOT
  return env


@pytest.fixture(scope='module')
def results(digits_dir, tmp_path_factory):
  """{case id: CompletedProcess}, all cases run at once, up to one per core at a time."""
  def run(case):
    script, args, _ = CASES[case]
    tmp = str(tmp_path_factory.mktemp(case))
    argv = [sys.executable, script] + [a.format(data=digits_dir, tmp=tmp) for a in args]
    env = quiet_env() if case in FRESH else dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)

  workers = os.cpu_count() or 2
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    futures = {case: pool.submit(run, case) for case in CASES}
    return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize('case', list(CASES))
def test_bad_flags_exit_2_with_one_error_line(results, case):
  result = results[case]
  report = 'exit %d\nstdout:\n%s\nstderr:\n%s' % (result.returncode, result.stdout,
                                                  result.stderr)
  assert 'Traceback' not in result.stderr + result.stdout, report
  assert result.returncode == 2, report
  lines = result.stderr.splitlines()
  assert len(lines) == 1, report           # nothing else: no TensorFlow start-up notices
  assert lines[0].startswith('error: '), report
  assert lines[0][len('error: '):].strip(), report
  for text in CASES[case][2]:
    assert text in lines[0], report
