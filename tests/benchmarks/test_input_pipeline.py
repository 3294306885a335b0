"""`python -m benchmarks.input_pipeline` end to end on tiny settings (a smoke test: the
figures themselves are the benchmark's run, recorded in docs/benchmarks.md, never asserted)."""

import json
import subprocess
import sys

import pytest

from tests.project_sources import ROOT

# One decode-bound process and one parallel call: each spawned decode process imports
# TensorFlow and decodes for seconds before it is ready, whatever the machine's cores.
TINY = ['--rounds=1', '--noconverter', '--num_classes=2', '--videos_per_class=4',
        '--batches=1', '--warmup_batches=1', '--batch_size=2', '--clip_frames=8',
        '--min_frames=8', '--max_frames=10', '--crop_size=32', '--decode_seconds=0.2',
        '--video_size=48x64', '--short_side=40', '--num_processes=1', '--num_parallel_calls=1']


@pytest.mark.slow
def test_it_reports_clips_per_core_and_the_decode_bound_ratio_against_its_target():
  run = subprocess.run([sys.executable, '-m', 'benchmarks.input_pipeline'] + TINY, cwd=ROOT,
                       capture_output=True, text=True, timeout=300, check=True)
  lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{')]
  measured = {line['measurement']: line for line in lines if 'measurement' in line}
  assert set(measured) == {'clip_pipeline', 'clip_pipeline_cpu_consumer', 'clip_pipeline_float',
                           'decode_bound', 'frame_folder_python', 'frame_folder_tfdata',
                           'frame_folder_i3d_code'}
  for line in measured.values():
    assert line['clips_per_sec'] > 0 and line['cores'] >= 1
    assert line['clips_per_sec_per_core'] == pytest.approx(line['clips_per_sec'] / line['cores'],
                                                          abs=0.01)
  bound, = [line for line in lines if line.get('ratio') == 'clip_pipeline / decode_bound']
  assert bound['target'] == 0.9 and len(bound['ratios']) == 1
  assert run.stdout.splitlines()[-1].startswith('machine: ')
