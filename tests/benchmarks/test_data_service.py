"""benchmarks.data_service end to end on tiny settings, in this process as its main runs
it: it starts its own tf.data service, times both trainings and prints its JSON lines (no
figure is judged: the target is the benchmark's, recorded in docs/benchmarks.md); its
settings' rules; and its contract (a bad flag: one line, status 2) in a fresh process."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from benchmarks import data_service
from core.errors import ConfigError
from core.params import config_from_argv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ['--rounds=1', '--steps=1', '--warmup_steps=1', '--clip_frames=4', '--min_frames=8',
        '--max_frames=10', '--video_size=48x64', '--short_side=64', '--batch_size=2']


def _thread_affinities():
  affinities = {}
  for thread in os.listdir('/proc/self/task'):
    try:
      affinities[int(thread)] = os.sched_getaffinity(int(thread))
    except ProcessLookupError:  # The thread ended meanwhile.
      pass
  return affinities


@pytest.mark.slow
@pytest.mark.cluster
def test_the_benchmark_runs_end_to_end_and_prints_its_lines(tmp_path, capsys):
  """What the benchmark's main runs, in this process (the trainer's: it pins this
  process's threads to --trainer_core, unpinned again after); its dispatcher and data
  worker are processes of their own, as in a run."""
  settings = data_service.check_settings(config_from_argv(
      data_service.DataServiceBenchSettings, ['--work_dir=%s' % tmp_path] + TINY)[0])
  allowed = os.sched_getaffinity(0)
  try:
    data_service.run(settings, str(tmp_path))
  finally:
    for thread in _thread_affinities():
      try:
        os.sched_setaffinity(thread, allowed)
      except ProcessLookupError:
        pass
  assert all(cores == allowed for cores in _thread_affinities().values())
  out = capsys.readouterr().out
  lines = [json.loads(line) for line in out.splitlines() if line.startswith('{')]
  measured = [(line['measurement'], line['input']) for line in lines if 'measurement' in line]
  assert measured == [('input pipeline alone', 'local'), ('model, synthetic data', 'local'),
                      ('full training step', 'local'), ('input pipeline alone', 'service'),
                      ('full training step', 'service')]
  ratio = next(line for line in lines if line.get('ratio', '').startswith('full step'))
  assert len(ratio['ratios']) == 1 and ratio['target'] == data_service.TARGET
  assert sorted(line['doctor'] for line in lines if 'doctor' in line) == ['local', 'service']
  assert any('cores_per_h200_tf32' in line for line in lines)
  machine = out.splitlines()[-1]
  assert machine.startswith('machine: ') and '(threads elsewhere: 0)' in machine
  # The service's servers logged to the work directory and were ended with the run.
  with open(str(tmp_path / 'service' / 'data_worker.log')) as handle:
    assert 'ready on port' in handle.read()


def test_a_flag_mistake_is_one_line_and_status_2():
  """The tool's contract, in a fresh process (no TensorFlow imported before the check)."""
  result = subprocess.run([sys.executable, '-m', 'benchmarks.data_service', '--steps=0'],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert (result.returncode, result.stdout) == (2, ''), result
  assert result.stderr.splitlines() == ['error: --steps=0 must be >= 1'], result.stderr


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
