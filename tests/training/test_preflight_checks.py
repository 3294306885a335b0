"""training/preflight_checks.py: the cluster is placed as the trainer places it (the chief's
view without --job_name), each check gives its own line, and a config without a cluster
is one error line."""

from training import preflight_checks
from training.config import TrainConfig
from tests.cluster_tasks import free_ports


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
