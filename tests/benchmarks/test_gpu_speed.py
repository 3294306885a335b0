"""benchmarks.gpu_speed at its smallest (no GPU here: the CPU smoke path, cifarnet on 2
images, float32 without XLA, one step of one round): a row per variant (replicated
included, with its ratio to parameter_server), timed by the doctor's rounds, with what ran
read from its traced step."""

import json
import math

import pytest

from benchmarks import gpu_speed

TINY = gpu_speed.GpuSpeedSettings(models=('cifarnet',), precisions=('float32',),
                                  xla_modes=('off',), cpu_cifarnet_batch_size=2,
                                  cpu_steps=1, cpu_rounds=1, warmup_steps=0)


@pytest.mark.slow
def test_every_variant_is_timed_and_says_what_ran(tmp_path, capsys):
  rows = gpu_speed.run(gpu_speed.check_settings(TINY), str(tmp_path))
  assert [(row.model, row.variant) for row in rows] == [
      ('cifarnet', label) for label, _ in gpu_speed.VARIANTS]
  for row in rows:
    assert row.error is None, row.error
    assert len(row.rates) == 1 and row.examples_per_sec > 0
    assert math.isfinite(row.examples_per_sec) and row.first_step_secs > 0
    assert 'float32' in row.ran
  out = capsys.readouterr().out
  assert 'CPU smoke check' in out and out.count('"model": "cifarnet"') == len(rows)
  replicated = [json.loads(line) for line in out.splitlines()
                if line.startswith('{') and '"variant": "replicated"' in line]
  assert len(replicated) == 1 and replicated[0]['vs_parameter_server'] > 0

