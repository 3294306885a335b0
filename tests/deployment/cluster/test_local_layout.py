"""deployment.cluster.local_layout: a local cluster's tasks and what each runs, without
starting anything. (Started: test_launch_local_*.py; the launcher's lines: its
supervision test.)"""

import json
import os

import pytest

from core.params import ConfigError
from deployment.cluster.local_layout import ClusterLayout, check_layout


def test_a_layout_names_its_tasks_and_starts_or_writes_nothing(tmp_path):
  log_dir = str(tmp_path / 'logs')
  layout = ClusterLayout(1, 2, ['trainer', '--x=1'], log_dir)
  assert [t.name for t in layout.tasks] == ['ps-0', 'worker-0', 'worker-1']
  assert len({t.port for t in layout.tasks}) == 3
  assert [t.log_path for t in layout.tasks] == [
      os.path.join(log_dir, name + '.log') for name in ('ps-0', 'worker-0', 'worker-1')]
  assert all(t.process is None and t.returncode is None for t in layout.tasks)
  assert not os.path.exists(log_dir)
  worker = layout.task('worker-1')
  ps_host, = layout.hosts('ps')
  assert layout.argv(worker) == [
      'trainer', '--x=1', '--ps_hosts=' + ps_host,
      '--worker_hosts=' + ','.join(layout.hosts('worker')), '--job_name=worker',
      '--task_index=1']
  assert layout.chief is layout.task('worker-0')
  assert layout.training_tasks() == layout.tasks


def test_tf_config_makes_worker_0_the_chief_and_keeps_the_base_environment(tmp_path):
  layout = ClusterLayout(1, 2, ['trainer'], str(tmp_path), addressing='tf_config')
  base = {'KEEP': 'me'}
  places = {}
  for task in layout.tasks:
    assert layout.argv(task) == ['trainer']
    env = layout.environment(task, base)
    assert env['KEEP'] == 'me'
    places[task.name] = json.loads(env['TF_CONFIG'])['task']
  assert base == {'KEEP': 'me'}
  assert places == {'ps-0': {'type': 'ps', 'index': 0},
                    'worker-0': {'type': 'chief', 'index': 0},
                    'worker-1': {'type': 'worker', 'index': 0}}


@pytest.mark.parametrize('args, words', [
    ((-1, 2, ['t'], 'logs', 'flags', 0), '--num_ps=-1, --num_workers=2'),
    ((1, 0, ['t'], 'logs', 'flags', 0), '--num_workers >= 1'),
    ((1, 2, ['t'], 'logs', 'flags', -1), '--num_data_workers=-1 must be >= 0'),
    ((1, 2, ['t'], 'logs', 'env', 0), '--addressing=env is not known; valid: flags, tf_config'),
    ((1, 2, ['t'], '', 'flags', 0), '--task_log_dir is required'),
    ((1, 2, [], 'logs', 'flags', 0), 'no command to run'),
    ((1, 2, ['t', '--job_name=ps'], 'logs', 'flags', 0), 'remove --job_name=ps'),
    ((1, 2, ['t', '--data_service_address=a:1'], 'logs', 'flags', 1),
     'remove --data_service_address=a:1'),
])
def test_a_layout_no_cluster_can_run_is_one_line_naming_the_flag(args, words):
  with pytest.raises(ConfigError, match=words):
    check_layout(*args)
  with pytest.raises(ConfigError, match=words):
    ClusterLayout(*args)
