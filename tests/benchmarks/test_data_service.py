"""benchmarks.data_service end to end on tiny settings: it starts its own tf.data service,
times both trainings and prints its JSON lines (no figure is judged: the target is the
benchmark's, recorded in docs/benchmarks.md); and its settings' rules."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from benchmarks import data_service
from core.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ['--rounds=1', '--steps=1', '--warmup_steps=1', '--clip_frames=4', '--min_frames=8',
        '--max_frames=10', '--video_size=48x64', '--short_side=64', '--batch_size=2']


@pytest.mark.slow
@pytest.mark.cluster
def test_the_benchmark_runs_end_to_end_and_prints_its_lines(tmp_path):
  result = subprocess.run(
      [sys.executable, '-m', 'benchmarks.data_service', '--work_dir=%s' % tmp_path] + TINY,
      cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{')]
  measured = [(line['measurement'], line['input']) for line in lines if 'measurement' in line]
  assert measured == [('input pipeline alone', 'local'), ('model, synthetic data', 'local'),
                      ('full training step', 'local'), ('input pipeline alone', 'service'),
                      ('full training step', 'service')]
  ratio = next(line for line in lines if line.get('ratio', '').startswith('full step'))
  assert len(ratio['ratios']) == 1 and ratio['target'] == data_service.TARGET
  assert sorted(line['doctor'] for line in lines if 'doctor' in line) == ['local', 'service']
  assert any('cores_per_h200_tf32' in line for line in lines)
  machine = result.stdout.splitlines()[-1]
  assert machine.startswith('machine: ') and '(threads elsewhere: 0)' in machine
  # The service's servers logged to the work directory and were ended with the run.
  with open(str(tmp_path / 'service' / 'data_worker.log')) as handle:
    assert 'ready on port' in handle.read()


@pytest.mark.parametrize('changes, flag', [
    (dict(worker_core=0), '--worker_core=0'),
    (dict(trainer_core=999), '--trainer_core=999'),
    (dict(steps=0), '--steps=0'),
    (dict(video_size='big'), '--video_size=big'),
])
def test_settings_that_measure_nothing_are_refused(changes, flag):
  settings = dataclasses.replace(data_service.DataServiceBenchSettings(), **changes)
  with pytest.raises(ConfigError, match=flag):
    data_service.check_settings(settings)


def test_the_gpu_arithmetic_divides_a_gpu_rate_by_one_cores_clips():
  # 1536 frames/s = 24 clips of 64 frames; 120 / 24 = 5 cores, 40 for 8 GPUs; 144 / 24 = 6.
  line = data_service.gpu_arithmetic(1536.0)
  assert line['data_worker_clips_per_sec_per_core'] == 24.0
  assert (line['cores_per_h200_tf32'], line['cores_per_8_h200_tf32']) == (5.0, 40.0)
  assert (line['cores_per_h200_float16'], line['cores_per_8_h200_float16']) == (6.0, 48.0)
