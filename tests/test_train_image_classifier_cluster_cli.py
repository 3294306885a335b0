"""train_image_classifier.py with cluster settings that cannot work: exit status 2 and ONE
line `error: ...` naming the flag or TF_CONFIG, before any server starts.

(The rules themselves are unit-tested in tests/deployment/cluster/test_ps_cluster.py and
tests/training/test_lifecycle.py; these check that the entry script reports them.)
"""

import concurrent.futures
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALID = ['--dataset_name=digits', '--dataset_dir={data}', '--model_name=lenet',
         '--train_dir={tmp}/train', '--max_number_of_steps=1']
CLUSTER = ['--ps_hosts=127.0.0.1:1', '--worker_hosts=127.0.0.1:2,127.0.0.1:3']
TF_CONFIG = json.dumps({'cluster': {'chief': ['127.0.0.1:2'], 'ps': ['127.0.0.1:1']},
                        'task': {'type': 'evaluator', 'index': 0}})

# id: (argv after the script, TF_CONFIG or None, texts the error line must hold)
CASES = {
    'flags_and_tf_config': (VALID + CLUSTER + ['--job_name=worker'], TF_CONFIG,
                            ['TF_CONFIG', '--ps_hosts']),
    'replicas_conflict': (VALID + CLUSTER + ['--job_name=worker', '--worker_replicas=3'],
                          None, ['--worker_replicas=3', '2 workers']),
}


@pytest.fixture(scope='module')
def results(digits_dir, tmp_path_factory):
  def run(case):
    args, tf_config, _ = CASES[case]
    tmp = str(tmp_path_factory.mktemp(case))
    env = {k: v for k, v in os.environ.items() if k not in ('TF_CONFIG', 'PYTHONWARNINGS',
                                                             'TF_CPP_MIN_LOG_LEVEL')}
    env['PYTHONPATH'] = ROOT
    if tf_config:
      env['TF_CONFIG'] = tf_config
    argv = [sys.executable, 'train_image_classifier.py'] + [
        a.format(data=digits_dir, tmp=tmp) for a in args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)

  with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    futures = {case: pool.submit(run, case) for case in CASES}
    return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize('case', list(CASES))
def test_cluster_mistakes_exit_2_with_one_error_line(results, case):
  result = results[case]
  report = 'exit %d\nstderr:\n%s' % (result.returncode, result.stderr)
  assert result.returncode == 2, report
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), report
  for text in CASES[case][2]:
    assert text in lines[0], report
