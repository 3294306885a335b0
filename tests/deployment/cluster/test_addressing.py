"""deployment/cluster/addressing.py: --addressing's registry and `find_task`. Each
scheduler's environment is tried in its own test (test_slurm_env.py, test_jobset_env.py)."""

import json

import pytest

from deployment.cluster import addressing
from deployment.cluster.task_spec import ClusterError, TaskSpec

NO_FLAGS = ((), (), None, 0)
WORKERS = ('10.0.0.2:2222', '10.0.0.3:2222')


def test_tf_config_is_found_by_auto_and_by_its_name():
  text = json.dumps({'cluster': {'worker': list(WORKERS)}, 'task': {'type': 'worker',
                                                                    'index': 1}})
  task = TaskSpec((), WORKERS, 'worker', 1, 'TF_CONFIG')
  assert addressing.find_task('auto', NO_FLAGS, {'TF_CONFIG': text}) == task
  assert addressing.find_task('tf_config', NO_FLAGS, {'TF_CONFIG': text}) == task
  assert addressing.find_task('auto', NO_FLAGS, {}) is None   # A single process.


def test_flags_are_read_alone_and_needed_when_asked_for():
  flags = ((), WORKERS, 'worker', 0)
  assert addressing.find_task('flags', flags, {}) == TaskSpec((), WORKERS, 'worker', 0)
  with pytest.raises(ClusterError, match='--addressing=flags needs --ps_hosts'):
    addressing.find_task('flags', NO_FLAGS, {})


def test_every_registered_source_is_a_choice_after_auto_and_flags():
  assert addressing.ADDRESSING_CHOICES == ('auto', 'flags', 'tf_config', 'slurm', 'jobset')


@pytest.mark.parametrize('name', ['slurm', 'auto', 'flags'])
def test_the_registry_refuses_a_name_twice(name):
  with pytest.raises(ValueError, match='already registered'):
    addressing.register_addressing(name, lambda environ, num_ps: None, '')
