"""benchmarks.cluster: its rounds (the order flips every round, the warm-up round is
printed and left out of the summaries) on stand-in runs, the examples a global step
holds in each mode, and at its smallest as a real cluster (lenet, a few steps, one round;
1 ps + 1 worker, 1 ps + 2 workers, 2 workers all-reducing without ps)."""

import json
import math
import os

import pytest

from benchmarks import cluster


def _record(workers, rate, ps=True):
  cpu = {'ps-0': 0.01} if ps else {}
  cpu.update({'worker-%d' % i: 0.02 for i in range(workers)})
  return {'workers': workers, 'job_examples_per_sec': rate, 'other_cores': 0.0,
          'cpu_secs_per_global_step': cpu}


def test_the_rounds_flip_the_order_and_the_summary_is_the_median_of_round_ratios(
    monkeypatch, tmp_path, capsys):
  runs = []

  def run(settings, workers, dataset_dir, work_dir, name):
    runs.append(name)
    return _record(workers, 100.0 * workers + len(runs))
  monkeypatch.setattr(cluster, 'run', run)
  settings = cluster.ClusterSettings(rounds=2, dataset_dir=str(tmp_path),
                                     work_dir=str(tmp_path))
  cluster.compare(settings)
  assert runs == ['round0_1w', 'round0_2w', 'round1_2w', 'round1_1w', 'round2_1w',
                  'round2_2w']
  lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
           if line.startswith('{')]
  assert [line['warmup'] for line in lines[:6]] == [True, True] + [False] * 4
  summary = lines[6]
  # Round 1: 1 worker 104, 2 workers 203; round 2: 105 and 206.
  assert summary['rounds'] == 2 and summary['ratios'] == [round(203 / 104, 3),
                                                          round(206 / 105, 3)]


def test_allreduce_is_a_configuration_of_every_round_beside_the_others(
    monkeypatch, tmp_path, capsys):
  runs = []

  def run(settings, workers, dataset_dir, work_dir, name, allreduce=False):
    runs.append(name)
    return _record(workers, {'1w': 100.0, '2w': 180.0}.get(name[-2:], 190.0),
                   ps=not allreduce)

  def run_two_jobs(settings, dataset_dir, work_dir, name):
    runs.append(name)
    return {'job_examples_per_sec': 200.0, 'other_cores': 0.0,
            'jobs': [_record(1, 100.0), _record(1, 100.0)]}
  monkeypatch.setattr(cluster, 'run', run)
  monkeypatch.setattr(cluster, 'run_two_jobs', run_two_jobs)
  settings = cluster.ClusterSettings(rounds=1, sync=True, two_jobs=True, allreduce=True,
                                     dataset_dir=str(tmp_path), work_dir=str(tmp_path))
  cluster.compare(settings)
  assert runs == ['round0_1w', 'round0_2w', 'round0_jobs', 'round0_allreduce',
                  'round1_allreduce', 'round1_jobs', 'round1_2w', 'round1_1w']
  summary = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith('{')][8]
  assert summary['allreduce_examples_per_sec'] == 190.0
  assert summary['allreduce_ratio'] == 1.9 and summary['allreduce_ratios'] == [1.9]
  assert summary['allreduce_vs_two_workers_sync'] == round(190 / 180, 3)
  assert summary['allreduce_of_two_jobs'] == 0.95
  assert set(summary['allreduce_cpu_secs_per_global_step']) == {'worker-0', 'worker-1'}
  # 1 worker: 0.02 + 0.01 ps per step; 2 all-reducing: max(0.04 / 2, 0.02), 2 batches.
  assert summary['allreduce_two_core_bound_ratio'] == 3.0


@pytest.mark.parametrize('mode, steps, per_step, extra', [
    ('async', 42, 8, []), ('sync', 21, 16, ['--sync_replicas', '--replicas_to_aggregate=2']),
    ('allreduce', 21, 16, ['--variable_update=replicated'])])
def test_every_worker_runs_every_step_but_in_async(mode, steps, per_step, extra):
  settings = cluster.ClusterSettings(batch_size=8, steps_per_worker=21, sync=mode == 'sync')
  assert cluster.mode_of(settings, allreduce=mode == 'allreduce') == mode
  flags = cluster._train_flags(settings, 'data', 'train', 2, mode)
  assert '--max_number_of_steps=%d' % steps in flags
  assert [f for f in flags if f.startswith(('--sync', '--replicas', '--variable'))] == extra
  assert cluster.examples_per_global_step(settings, mode, 2) == per_step


@pytest.mark.slow
@pytest.mark.cluster
def test_the_benchmark_runs_one_round_of_real_clusters(digits_dir, tmp_path, capsys,
                                                      monkeypatch):
  """Each configuration runs once as a real cluster (1 ps + 1 worker, 1 ps + 2 workers, 2
  workers all-reducing), in the warm-up round; the measured round takes the same records
  (the rounds' order and the warm-up left out: the stand-in tests above), so the
  summaries are computed from real runs at 7 task starts, not 14.

  The tasks are this process's children, started by LocalCluster and waited for when
  each run ends, so `other_cores` (the machine's busy CPU less this process's and its
  waited-for children's) leaves their CPU out; in a parallel run the other pytest
  worker's is counted there, so only its range is checked. The per-task CPU is read by
  pid."""
  real_run, records = cluster.run, {}

  def run_once(settings, workers, dataset_dir, work_dir, name, allreduce=False):
    key = (workers, allreduce)
    if key not in records:
      records[key] = real_run(settings, workers, dataset_dir, work_dir, name, allreduce)
    return dict(records[key], run=name)
  monkeypatch.setattr(cluster, 'run', run_once)
  settings = cluster.check_settings(cluster.ClusterSettings(
      model_name='lenet', batch_size=8, steps_per_worker=21, warmup_steps=2, rounds=1,
      allreduce=True, timeout_secs=60, dataset_dir=digits_dir, work_dir=str(tmp_path)))
  cluster.compare(settings)
  lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
           if line.startswith('{')]
  reduced = [line for line in lines[:6] if line['run'].endswith('allreduce')]
  assert [(r['mode'], r['workers']) for r in reduced] == [('allreduce', 2)] * 2
  assert set(reduced[-1]['cpu_secs_per_global_step']) == {'worker-0', 'worker-1'}
  assert sorted(records) == [(1, False), (2, False), (2, True)]
  for record in lines[:6]:
    assert 0.0 <= record['other_cores'] <= (os.cpu_count() or 1), record
  summary = lines[6]
  assert summary['which'] == 'all rounds' and summary['rounds'] == 1
  for key in ('one_worker_examples_per_sec', 'two_workers_examples_per_sec',
              'median_ratio', 'two_core_bound_ratio', 'allreduce_examples_per_sec',
              'allreduce_ratio', 'allreduce_vs_two_workers_async',
              'allreduce_two_core_bound_ratio'):
    assert summary[key] > 0 and math.isfinite(summary[key]), (key, summary)
