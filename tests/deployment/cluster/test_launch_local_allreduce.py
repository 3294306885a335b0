"""deployment.cluster.launch_local without parameter servers (`--num_ps=0`): every task is a
worker told there is no ps, by host flags or by TF_CONFIG, and places itself as the
trainer does; supervision needs no ps (stand-in tasks, tests/launch_local_runs.py); and
2 workers x 2 clones all-reducing train like ONE worker of the global batch
(tests/global_batch.py's reference and bound), real processes."""

import glob
import json
import os
import subprocess

import pytest

from core.params import config_from_argv
from deployment.cluster import task_spec
from deployment.cluster.launch_local import LocalCluster
from tests.cluster_tasks import (ROOT, assert_clean_log, checkpoint_steps, steps,
                                 WAIT_SECS)
from tests.global_batch import PER_WORKER_BATCH, STEPS, assert_equivalent
from tests.launch_local_runs import (environment, fake_cluster, launcher_argv,
                                     shared_sync_reference)
from training.config import TrainConfig
from training.lifecycle import resolve_job


@pytest.mark.parametrize('addressing', ['flags', 'tf_config'])
def test_without_ps_every_task_is_a_worker_told_no_ps(tmp_path, addressing):
  """The tasks' command lines and environments, and the places the trainer reads from
  them (training.lifecycle.resolve_job, as train_image_classifier.py's main does): the
  same with host flags as with TF_CONFIG, which the real run below uses."""
  cluster = LocalCluster(0, 3, ['trainer', '--variable_update=replicated'], str(tmp_path),
                         isolation='none', addressing=addressing)
  assert [t.name for t in cluster.tasks] == ['worker-0', 'worker-1', 'worker-2']
  workers = cluster.hosts('worker')
  places, jobs = [], []
  for task in cluster.tasks:
    argv, env = cluster.command(task), cluster._environment(task)  # pylint: disable=protected-access
    if addressing == 'flags':
      assert argv == ['trainer', '--variable_update=replicated',
                      '--worker_hosts=' + ','.join(workers), '--job_name=worker',
                      '--task_index=%d' % task.index]
      places.append(task_spec.task_from_flags((), workers, 'worker', task.index))
    else:
      assert argv == ['trainer', '--variable_update=replicated'] and 'ps' not in json.loads(
          env['TF_CONFIG'])['cluster']
      places.append(task_spec.task_from_tf_config(env['TF_CONFIG']))
    jobs.append(resolve_job(config_from_argv(TrainConfig, argv[1:])[0], env))
  assert [(p.ps_hosts, p.worker_hosts, p.task_index) for p in places] == [
      ((), tuple(workers), i) for i in range(3)]
  assert [(j.task.ps_hosts, j.task.worker_hosts, j.task.job_name, j.task.task_index,
           j.task.is_chief, j.config.worker_replicas, j.config.num_ps_tasks, j.config.task)
          for j in jobs] == [((), tuple(workers), 'worker', i, i == 0, 3, 0, i)
                             for i in range(3)]
  line = cluster.startup_line()
  assert line.startswith('launch_local: 3 workers without ps (all-reduce) on 127.0.0.1 '
                         '(ports: worker %s)' % ','.join(h.split(':')[1] for h in workers))
  assert '--ps_hosts' not in line


def test_a_cluster_without_ps_ends_with_its_chief_or_its_first_failure(tmp_path):
  """Supervision needs no ps: a failed worker stops the others and gives its status; the
  chief's success ends the job with 0."""
  with fake_cluster(tmp_path / 'failed', 'worker-1:exit138', num_ps=0) as cluster:
    assert cluster.supervise(lambda: False, grace_secs=10, poll_secs=0.05) == 138
  assert [t.returncode for t in cluster.tasks] == [0, 138]   # The chief: stopped.
  with fake_cluster(tmp_path / 'done', 'worker-0:finish,worker-1:finish', num_ps=0) as cluster:
    assert cluster.supervise(lambda: False, grace_secs=10, poll_secs=0.05) == 0


@pytest.mark.cluster
def test_two_workers_of_two_clones_without_ps_update_like_one_worker_of_the_global_batch(
    tmp_path, tmp_path_factory):
  """All-reduce: 2 workers x 2 clones of batch b/2, no ps (--variable_update=replicated),
  against the same ONE worker of batch 2b: worker k's two clones draw shard k's b
  examples each step, and the all-reduce averages the 4 clones' gradients. The tasks
  learn the cluster from TF_CONFIG (a chief and a worker, no ps); with host flags they
  place themselves the same (test_without_ps_every_task_is_a_worker_told_no_ps)."""
  train_dir = tmp_path / 'cluster'
  flags, reference, start = shared_sync_reference(tmp_path_factory, train_dir)
  flags = [flag for flag in flags if not flag.startswith(('--sync_replicas', '--replicas_to',
                                                          '--sync_trace', '--batch_size'))]
  flags += ['--batch_size=%d' % (PER_WORKER_BATCH // 2), '--num_clones=2', '--clone_on_cpu',
            '--variable_update=replicated']
  result = subprocess.run(launcher_argv(0, 2, flags, '--task_log_dir=%s' % (train_dir / 'logs'),
                                        '--addressing=tf_config'),
                          cwd=ROOT, env=environment(), capture_output=True, text=True,
                          timeout=WAIT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'worker-0: 0, worker-1: 0' in result.stdout, result.stdout
  logs = {os.path.basename(p): open(p).read()
          for p in glob.glob(str(train_dir / 'logs' / '*.log'))}
  assert sorted(logs) == ['worker-0.log', 'worker-1.log']
  for name, text in logs.items():
    assert_clean_log(text, name)
    assert steps(text) == [STEPS], text
    assert 'gradients all-reduced over 2 clone(s) of 2 worker(s)' in text
    assert 'ran on /job:worker/replica:0/task:%s/device:CPU:1' % name[7] in text, text
  assert len(glob.glob(str(train_dir / 'events.out.tfevents.*'))) == 1
  assert checkpoint_steps(train_dir) == [STEPS]
  largest, of_movement = assert_equivalent(str(train_dir / ('model.ckpt-%d' % STEPS)),
                                           reference, start)
  print('2 workers x 2 clones all-reduce (TF_CONFIG) against one worker of the global batch: '
        'largest absolute difference %.3g, %.3g of the movement' % (largest, of_movement))

