"""training/preflight_checks.py: the cluster is placed as the trainer places it (the chief's
view without --job_name), each check gives its own line, the trainer's own checks run for
the chief, a launch_local job and a Slurm job from its submitting host are placed from
their layout flags, and a config without a cluster is one error line."""

import re

import pytest

from core.errors import ConfigError
from deployment.cluster.preflight import PlannedJob
from tests.cluster_tasks import free_ports
from tf_compat import tf
from training import preflight_checks
from training.config import TrainConfig
from training.setup import check_train_config


def config(digits_dir, train_dir, workers, **overrides):
  hosts = ['127.0.0.1:%d' % port for port in free_ports(1 + workers)]
  return TrainConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                     train_dir=str(train_dir), ps_hosts=tuple(hosts[:1]),
                     worker_hosts=tuple(hosts[1:]), **overrides)


def test_without_job_name_the_cluster_is_seen_as_its_chief_sees_it(tmp_path):
  job = preflight_checks.place(config('/data', tmp_path, 3), {})
  assert job.task.is_chief and job.config.worker_replicas == 3
  ps = preflight_checks.place(config('/data', tmp_path, 3, job_name='ps'), {})
  assert ps.task.is_ps


def test_each_check_gives_its_line(digits_dir, tmp_path):
  results = preflight_checks.check_before_launch(config(digits_dir, tmp_path / 't', 2), {})
  assert [passed for passed, _ in results] == [True] * 4, results
  results = preflight_checks.check_before_launch(config(digits_dir, tmp_path / 't', 5), {})
  failed = [line for passed, line in results if not passed]
  assert len(results) == 4 and len(failed) == 1, results
  assert failed[0].startswith('--worker_replicas=5: ') and 'has 4' in failed[0]


def test_no_cluster_is_one_error_line(tmp_path):
  plain = TrainConfig(dataset_name='digits', dataset_dir='/data', model_name='lenet',
                      train_dir=str(tmp_path))
  results = preflight_checks.check_before_launch(plain, {})
  assert len(results) == 1 and not results[0][0]
  assert results[0][1].startswith('no cluster to check: give --ps_hosts and --worker_hosts')
  mistake = preflight_checks.check_before_launch(plain, {'TF_CONFIG': '{'})
  assert mistake[0][1].startswith('TF_CONFIG is not valid JSON') and len(mistake) == 1


REPLICAS_REFUSED = ('--replicas_to_aggregate=10 must be <= --worker_replicas=2 (workers whose '
                    'gradients one synchronous step waits for)')


def failures(results):
  return [line for passed, line in results if not passed]


def test_the_trainers_own_checks_run_for_the_chief(digits_dir, tmp_path):
  """The 10-worker sync recipe's --replicas_to_aggregate on 2 workers: the trainer's line,
  from training.setup, where check_cluster used to print four `ok:` lines."""
  sync = dict(sync_replicas=True, replicas_to_aggregate=10)
  results = preflight_checks.check_before_launch(
      config(digits_dir, tmp_path / 't', 2, **sync), {})
  assert len(results) == 4 and failures(results) == [REPLICAS_REFUSED], results
  with pytest.raises(ConfigError, match=re.escape(REPLICAS_REFUSED)):   # the trainer's own
    check_train_config(TrainConfig(dataset_name='digits', dataset_dir=digits_dir,
                                   model_name='lenet', train_dir=str(tmp_path / 't'),
                                   worker_replicas=2, **sync))


def test_gpus_for_the_clones_are_left_to_the_nodes(digits_dir, tmp_path):
  results = preflight_checks.check_before_launch(
      config(digits_dir, tmp_path / 't', 2, num_clones=2), {})
  assert not failures(results), results
  gpus = len(tf.config.list_physical_devices('GPU'))
  if gpus < 2:
    assert results[2][1].endswith('; the 2 GPUs of --num_clones=2 are for each node to '
                                  'have (this machine sees %d)' % gpus)


def plain(digits_dir, train_dir, **overrides):
  return TrainConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                     train_dir=str(train_dir), **overrides)


def test_a_launch_local_job_gets_the_launchers_and_the_trainers_checks(digits_dir, tmp_path):
  job = PlannedJob(launch_local_workers=2)
  good = preflight_checks.check_before_launch(plain(digits_dir, tmp_path / 't'), {}, job)
  assert [passed for passed, _ in good] == [True] * 3, good
  assert good[0][1] == ('the launch_local job: 1 ps + 2 workers on this host, on ports the '
                        'launcher picks free at its start')
  assert 'a shard file for each of the 2 workers' in good[1][1]
  sync = plain(digits_dir, tmp_path / 't', sync_replicas=True, replicas_to_aggregate=10)
  assert failures(preflight_checks.check_before_launch(sync, {}, job)) == [REPLICAS_REFUSED]
  served = preflight_checks.check_before_launch(
      plain(digits_dir, tmp_path / 't'), {}, PlannedJob(launch_local_workers=5,
                                                        launch_local_data_workers=2))
  assert not failures(served) and 'through the tf.data service' in served[1][1], served
  no_ps = preflight_checks.check_before_launch(plain(digits_dir, tmp_path / 't'), {},
                                               PlannedJob(launch_local_workers=2,
                                                          launch_local_ps=0))
  assert failures(no_ps) == ['--worker_replicas=2 with --num_ps_tasks=0: workers without '
                             'parameter servers all-reduce their gradients, which needs '
                             '--variable_update=replicated (or give parameter servers)']
  all_reduce = preflight_checks.check_before_launch(
      plain(digits_dir, tmp_path / 't', variable_update='replicated'), {},
      PlannedJob(launch_local_workers=2, launch_local_ps=0))
  assert not failures(all_reduce), all_reduce
  assert all_reduce[0][1].startswith('the launch_local job: 2 workers without ps '
                                     '(all-reduce) on this host')
  own_hosts = config(digits_dir, tmp_path / 't', 2)
  [(passed, line)] = preflight_checks.check_before_launch(own_hosts, {}, job)
  assert not passed and line.startswith('the launch_local job (--launch_local_*): the '
                                        'launcher sets the cluster flags; remove --ps_hosts=')


def slurm(digits_dir, train_dir, num_ps=2, **overrides):
  return plain(digits_dir, train_dir, addressing='slurm', num_ps_tasks=num_ps, **overrides)


def test_a_slurm_job_is_checked_from_its_submitting_host_by_its_layout(digits_dir, tmp_path):
  """No SLURM_* variables: the layout flags give the step its chief will see."""
  submit_host = {}
  [(passed, line)] = preflight_checks.check_before_launch(
      slurm(digits_dir, tmp_path / 't'), submit_host)
  assert not passed and line.startswith('--addressing=slurm: this host is in no srun step')
  two = PlannedJob(slurm_ntasks=4, slurm_nodes=2)
  sync = slurm(digits_dir, tmp_path / 't', sync_replicas=True, replicas_to_aggregate=10)
  results = preflight_checks.check_before_launch(sync, submit_host, two)
  assert failures(results) == [REPLICAS_REFUSED], results
  assert results[0] == (True, 'the Slurm job of --slurm_ntasks=4: its training step of 4 '
                        'tasks (2 ps + 2 workers) lays out 2(x2) per node (block) on 2 '
                        'nodes; its ports are known at its start')
  ten = PlannedJob(slurm_ntasks=12, slurm_nodes=10, slurm_distribution='cyclic')
  job = preflight_checks.place(slurm(digits_dir, tmp_path / 't'), {}, ten)
  assert job.task.is_chief and job.config.worker_replicas == 10
  assert '2(x2),1(x8) per node (cyclic) on 10 nodes' in preflight_checks.check_before_launch(
      slurm(digits_dir, tmp_path / 't'), {}, ten)[0][1]


def test_a_slurm_nodelist_places_the_tasks_and_its_names_are_checked(digits_dir, tmp_path):
  named = PlannedJob(slurm_ntasks=4, slurm_nodelist='localhost,nosuchhost.invalid')
  job = preflight_checks.place(slurm(digits_dir, tmp_path / 't'), {}, named)
  assert [a.split(':')[0] for a in job.task.ps_hosts + job.task.worker_hosts] == [
      'localhost', 'localhost', 'nosuchhost.invalid', 'nosuchhost.invalid']   # block
  problems = failures(preflight_checks.check_before_launch(
      slurm(digits_dir, tmp_path / 't'), {}, named))
  assert len(problems) == 2 and all(p.startswith("worker %d's host nosuchhost.invalid does "
                                                 "not resolve (--slurm_nodelist)" % i)
                                    for i, p in enumerate(problems)), problems


@pytest.mark.parametrize('planned, addressing, num_ps, message', [
    (PlannedJob(slurm_ntasks=4, slurm_nodes=2), 'auto', 2,
     '--slurm_ntasks=4 describes a Slurm job: add --addressing=slurm'),
    (PlannedJob(slurm_ntasks=4), 'slurm', 2,
     '--slurm_ntasks=4 needs --slurm_nodes=N (sbatch --nodes) or --slurm_nodelist'),
    (PlannedJob(slurm_ntasks=4, slurm_nodes=5), 'slurm', 2,
     '--slurm_nodes=5 is more than --slurm_ntasks=4'),
    (PlannedJob(slurm_ntasks=4, slurm_nodes=3, slurm_nodelist='a,b'), 'slurm', 2,
     '--slurm_nodes=3 but --slurm_nodelist=a,b names 2 nodes'),
    (PlannedJob(slurm_ntasks=4, slurm_nodelist='a[1-'), 'slurm', 2,
     "--slurm_nodelist='a[1-' is not a Slurm host list"),
    (PlannedJob(slurm_ntasks=4, slurm_nodes=2, slurm_data_workers=1), 'slurm', 2,
     '--num_ps_tasks=2 with --slurm_ntasks=4 (2 of them the tf.data service): train.sbatch '
     'P runs P parameter servers and at least one worker; valid: 1..1'),
    (PlannedJob(slurm_ntasks=4, slurm_nodes=2, slurm_distribution='plane'), 'slurm', 2,
     '--slurm_distribution=plane is not known; valid: block, cyclic')])
def test_a_slurm_layout_mistake_is_one_line_naming_its_flag(tmp_path, planned, addressing,
                                                            num_ps, message):
  config = plain('/data', tmp_path, addressing=addressing, num_ps_tasks=num_ps)
  [(passed, line)] = preflight_checks.check_before_launch(config, {}, planned)
  assert not passed and line.startswith(message), line
