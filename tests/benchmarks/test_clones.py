"""benchmarks.clones at its smallest (lenet, 4 examples, one step of one round): each clone
count's line from the doctor's rounds, with positive figures and per-round ratios; with
both variable updates, replicated 2 clones against parameter_server 2 clones."""

import dataclasses
import math

import pytest

from benchmarks import clones
from core.errors import ConfigError

TINY = clones.ClonesSettings(model_name='lenet', global_batch=4, num_clones=(1, 2),
                             channels=1, num_classes=2, warmup_steps=0, steps=1, rounds=1)


@pytest.mark.slow
def test_the_benchmark_prints_a_line_per_clone_count_against_the_first(capsys):
  lines = clones.compare(clones.check_settings(TINY))
  assert [line['num_clones'] for line in lines] == [1, 2]
  for line in lines:
    assert line['examples_per_sec'] > 0 and math.isfinite(line['examples_per_sec'])
    assert len(line['rounds']) == 1 and len(line['ratios']) == 1
    assert line['median_ratio_to_baseline'] > 0
  assert lines[0]['ratios'] == [1.0]
  assert capsys.readouterr().out.count('"num_clones"') == 2


@pytest.mark.slow
def test_replicated_clones_are_timed_beside_parameter_server_ones(capsys):
  settings = dataclasses.replace(TINY, variable_updates=('parameter_server', 'replicated'))
  lines = clones.compare(clones.check_settings(settings))
  assert [(line['num_clones'], line['variable_update']) for line in lines] == [
      (1, 'parameter_server'), (2, 'parameter_server'), (2, 'replicated')]
  replicated = lines[-1]
  assert replicated['gradient_repacking'] == 2
  for key in ('examples_per_sec', 'median_ratio_to_baseline',
              'median_ratio_to_parameter_server'):
    assert replicated[key] > 0 and math.isfinite(replicated[key]), (key, replicated)
  assert len(replicated['ratios_to_parameter_server']) == 1
  assert 'median_ratio_to_parameter_server' not in lines[1]
  assert capsys.readouterr().out.count('"variable_update"') == 3


@pytest.mark.parametrize('changes, flag', [
    (dict(variable_updates=('mirrored',)), '--variable_updates=mirrored'),
    (dict(gradient_repacking=0), '--gradient_repacking=0'),
    (dict(global_batch=3), '--global_batch=3'), (dict(rounds=0), '--rounds=0'),
    (dict(steps=0), '--steps=0'), (dict(warmup_steps=-1), '--warmup_steps=-1')])
def test_settings_that_measure_nothing_are_refused(changes, flag):
  with pytest.raises(ConfigError, match=flag):
    clones.check_settings(clones.ClonesSettings(**changes))
