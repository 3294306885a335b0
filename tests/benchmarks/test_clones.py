"""benchmarks.clones at its smallest (lenet, 4 examples, one step of one round): each clone
count's line from the doctor's rounds, with positive figures and per-round ratios."""

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


@pytest.mark.parametrize('changes, flag', [
    (dict(global_batch=3), '--global_batch=3'), (dict(rounds=0), '--rounds=0'),
    (dict(steps=0), '--steps=0'), (dict(warmup_steps=-1), '--warmup_steps=-1')])
def test_settings_that_measure_nothing_are_refused(changes, flag):
  with pytest.raises(ConfigError, match=flag):
    clones.check_settings(clones.ClonesSettings(**changes))
