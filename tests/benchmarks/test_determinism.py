"""benchmarks.determinism at its smallest: both modes timed, the ratio reported, and the
process's op determinism left as it was."""

from tensorflow.python.framework import config as tf_config

from benchmarks import determinism

TINY = determinism.DeterminismSettings(model_name='lenet', global_batch=4, num_clones=2,
                                       steps=1, rounds=1)


def test_both_modes_are_timed_and_the_switch_is_left_as_found(capsys):
  line = determinism.compare(determinism.check_settings(TINY))
  assert line['sec_per_step_off'] > 0 and line['sec_per_step_on'] > 0
  assert line['on_over_off'] > 0 and len(line['ratios']) == 1
  assert not tf_config.is_op_determinism_enabled()
  assert '"on_over_off"' in capsys.readouterr().out
