"""train_image_classifier.py with cluster settings that cannot work: exit status 2 and ONE
line `error: ...` naming the flag or TF_CONFIG, before any server starts.

(The rules themselves are unit-tested in tests/deployment/cluster/test_ps_cluster.py and
tests/training/test_lifecycle.py; these check that the entry's main reports them. They
call its steps in this process, tests/entries.py; the script's own contract, a fresh
process, is tests/test_train_image_classifier_cli.py's.)
"""

import json

import pytest

from deployment.cluster import ps_cluster
from tests.entries import train_main

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


@pytest.mark.parametrize('case', list(CASES))
def test_cluster_mistakes_exit_2_with_one_error_line(digits_dir, tmp_path, capsys,
                                                     monkeypatch, case):
  def no_server(*args, **kwargs):
    raise AssertionError('a server was started: %r %r' % (args, kwargs))

  monkeypatch.setattr(ps_cluster, 'start_server', no_server)
  args, tf_config, texts = CASES[case]
  environ = {'TF_CONFIG': tf_config} if tf_config else {}
  status = train_main([a.format(data=digits_dir, tmp=tmp_path) for a in args], environ)
  stderr = capsys.readouterr().err
  report = 'exit %d\nstderr:\n%s' % (status, stderr)
  assert status == 2, report
  lines = stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), report
  for text in texts:
    assert text in lines[0], report
