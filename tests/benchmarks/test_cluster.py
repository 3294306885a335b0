"""benchmarks.cluster: its rounds (the order flips every round, the warm-up round is
printed and left out of the summaries) on stand-in runs, and at its smallest as a real
cluster (lenet, a few steps, one round)."""

import json
import math

import pytest

from benchmarks import cluster


def _record(workers, rate):
  cpu = {'ps-0': 0.01}
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


@pytest.mark.slow
@pytest.mark.cluster
# Forked tasks (tests/prestarted.py) are the fork server's children, so `other_cores`
# counts their CPU as other processes'; in a parallel run the other pytest workers' is
# counted there anyway, and nothing here reads it. The per-task CPU is read by pid.
def test_the_benchmark_runs_one_round_of_real_clusters(digits_dir, tmp_path, capsys):
  settings = cluster.check_settings(cluster.ClusterSettings(
      model_name='lenet', batch_size=8, steps_per_worker=21, warmup_steps=2, rounds=1,
      dataset_dir=digits_dir, work_dir=str(tmp_path)))
  cluster.compare(settings)
  lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
           if line.startswith('{')]
  summary = lines[4]
  assert summary['which'] == 'all rounds' and summary['rounds'] == 1
  for key in ('one_worker_examples_per_sec', 'two_workers_examples_per_sec',
              'median_ratio', 'two_core_bound_ratio'):
    assert summary[key] > 0 and math.isfinite(summary[key]), (key, summary)
