"""Every worker checks the chief's settings before its first step (training.cluster_agreement).

The unit tests compare settings dicts written out here and build the refusal's line; the
cluster test starts 2 workers without ps on 127.0.0.1, worker 1 given another
--gradient_repacking. With parameter servers, a worker restarted with another batch size
is refused in the synchronous job of tests/training/test_cluster_failures.py
(test_a_synchronous_job_rejoins_its_workers_and_replaces_a_chief_lost_inside_an_update:
status 2, the line, no step, 'leaves: failed (ConfigError), for good', the chief's
digest; the job then goes on), which saves this file a 3-task cluster of its own.
"""

import pytest

from core.errors import ConfigError

from deployment.cluster.launch_local import LocalCluster
from training import cluster_agreement
from tests.cluster_tasks import (error_lines, log_text, steps, train_flags,
                                 trainer, WAIT_SECS)

SETTINGS = {'model_name': 'lenet', 'batch_size': 16, 'sync_replicas': True,
            'learning_rate_boundaries': [100, 200], 'depth_multiplier': 0.5,
            'dataset size': 1000}


def test_identical_settings_agree_and_have_one_digest():
  other = dict(reversed(list(SETTINGS.items())))  # Order does not matter.
  assert cluster_agreement.first_difference(SETTINGS, other) is None
  assert cluster_agreement.digest(SETTINGS) == cluster_agreement.digest(other)


@pytest.mark.parametrize('name, value, named', [
    ('batch_size', 32, '--batch_size=32'),
    ('sync_replicas', False, '--nosync_replicas'),
    ('learning_rate_boundaries', [100, 300], '--learning_rate_boundaries=100,300'),
    ('dataset size', 999, 'a dataset of 999 examples'),
])
def test_the_first_difference_is_named_as_a_flag(name, value, named):
  own = dict(SETTINGS, **{name: value})
  assert cluster_agreement.first_difference(own, SETTINGS) == (name, value, SETTINGS[name])
  assert cluster_agreement._named(name, value) == named  # pylint: disable=protected-access
  assert cluster_agreement.digest(own) != cluster_agreement.digest(SETTINGS)


def test_a_setting_only_one_side_has_is_a_difference():
  own = dict(SETTINGS, clip_frames=16)
  assert cluster_agreement.first_difference(own, SETTINGS) == ('clip_frames', 16, None)
  assert cluster_agreement.first_difference(SETTINGS, own) == ('clip_frames', None, 16)


def test_the_refusal_names_the_worker_the_flag_both_values_and_both_digests(caplog):
  own = dict(SETTINGS, batch_size=32)
  with pytest.raises(ConfigError) as raised:
    cluster_agreement.check_against_chief(own, SETTINGS, 1)
  assert str(raised.value) == (
      'worker 1 does not train what the chief trains: --batch_size=32 here, --batch_size=16 '
      'on the chief (worker 0); start every task with the same flags (digest %s here, %s on '
      'the chief)' % (cluster_agreement.digest(own), cluster_agreement.digest(SETTINGS)))
  caplog.set_level('INFO', logger='absl')
  cluster_agreement.check_against_chief(dict(SETTINGS), SETTINGS, 1)  # Agrees: no error.
  assert 'Settings agree with the chief\'s: digest %s' % cluster_agreement.digest(
      SETTINGS) in caplog.text


@pytest.mark.cluster
def test_without_ps_a_worker_with_another_repacking_refuses_before_any_collective(
    digits_dir, tmp_path):
  """Workers all-reducing (no ps): the chief's settings come by broadcast before the
  session; worker 1, given another --gradient_repacking (another set of collectives),
  refuses in one line (2) instead of waiting in a collective that never matches; the
  chief, whose group lost a member, ends at its start-up timeout naming it (138)."""
  flags = train_flags(digits_dir, tmp_path / 'train', max_number_of_steps=10,
                      variable_update='replicated', startup_timeout_secs=8)
  cluster = LocalCluster(0, 2, trainer(flags), str(tmp_path / 'logs'))
  try:
    cluster.start_task('worker-0')
    cluster.command_line = trainer(flags + ['--gradient_repacking=3'])  # worker 1's start
    cluster.start_task('worker-1')
    statuses = {task.name: cluster.wait(task.name, WAIT_SECS) for task in cluster.tasks}
    logs = {task.name: log_text(task) for task in cluster.tasks}
  finally:
    cluster.kill()
  assert statuses == {'worker-0': 138, 'worker-1': 2}, logs
  line, = error_lines(logs['worker-1'])
  assert line.startswith('error: worker 1 does not train what the chief trains: '
                         '--gradient_repacking=3 here, --gradient_repacking=2 on the chief '
                         '(worker 0)'), line
  assert steps(logs['worker-1']) == [] and steps(logs['worker-0']) == []
  line, = error_lines(logs['worker-0'])
  assert 'not answering: worker 1 (' in line, line
