"""The entry scripts on a user mistake: exit status 2 and ONE line `error: ...` on stderr.

One case is the contract of train_image_classifier.py itself: a real `python
train_image_classifier.py --batch_size=-1 ...` in a fresh process, in the user's
environment without the variables that hide TensorFlow's notices, so its one line says
the entry hides them itself. The other cases call what the entries' mains call, in this
process (tests/entries.py), and read the printed lines with
capsys. Every training case also passes --max_number_of_steps=1 and a temporary
--train_dir, so a check that wrongly lets a case through trains one step instead of
forever.
"""

import os
import subprocess
import sys

import pytest

from core import errors
from tests.entries import evaluate, train_main

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

FRESH = 'negative_batch_size'   # train_image_classifier.py's contract: a real process.


def eval_main(argv):
  """eval.py's main in this process: its exit status for `argv`."""
  return evaluate(argv)[0]


def quiet_env():
  """The user's environment minus anything that would hide or add TensorFlow noise."""
  env = dict(os.environ)
  for name in ('SLIMDEPLOY_TF_VERBOSE', 'TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS'):
    env.pop(name, None)
  env['PYTHONPATH'] = ROOT
  return env


def assert_one_error_line(status, stdout, stderr, texts):
  report = 'exit %d\nstdout:\n%s\nstderr:\n%s' % (status, stdout, stderr)
  assert 'Traceback' not in stderr + stdout, report
  assert status == errors.USAGE, report
  lines = stderr.splitlines()
  assert len(lines) == 1, report           # nothing else: no TensorFlow start-up notices
  assert lines[0].startswith('error: '), report
  assert lines[0][len('error: '):].strip(), report
  for text in texts:
    assert text in lines[0], report


def test_the_script_exits_2_with_one_error_line_and_no_tensorflow_notices(digits_dir,
                                                                          tmp_path):
  script, args, texts = CASES[FRESH]
  argv = [sys.executable, script] + [a.format(data=digits_dir, tmp=tmp_path) for a in args]
  result = subprocess.run(argv, cwd=ROOT, env=quiet_env(), capture_output=True, text=True,
                          timeout=300)
  assert_one_error_line(result.returncode, result.stdout, result.stderr, texts)


@pytest.mark.parametrize('case', [case for case in CASES if case != FRESH])
def test_bad_flags_exit_2_with_one_error_line(digits_dir, tmp_path, capsys, case):
  script, args, texts = CASES[case]
  argv = [a.format(data=digits_dir, tmp=tmp_path) for a in args]
  status = (train_main if script == TRAIN else eval_main)(argv)
  printed = capsys.readouterr()
  assert_one_error_line(status, printed.out, printed.err, texts)
