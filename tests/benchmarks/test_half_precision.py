"""benchmarks.half_precision at its smallest: every op in every dtype timed, float32 the
baseline of its op, the CPU and oneDNN's setting named."""

import pytest

from benchmarks import half_precision
from core.errors import ConfigError

TINY = half_precision.HalfPrecisionSettings(input_shape=(2, 4, 4, 2), kernel_size=3,
                                            filters=2, calls=1, rounds=1)


def test_every_op_and_dtype_gets_a_figure_against_float32(capsys):
  lines = half_precision.compare(half_precision.check_settings(TINY))
  assert [(line['op'], line['dtype']) for line in lines] == [
      (op, dtype) for op in half_precision.OPS for dtype in half_precision.DTYPES]
  for line in lines:
    assert line['ms'] > 0
    if line['dtype'] == 'float32':
      assert line['ratio_to_float32'] == 1.0
  out = capsys.readouterr().out
  assert 'machine: ' in out and 'oneDNN o' in out


def test_a_bad_shape_is_one_line():
  with pytest.raises(ConfigError, match='--input_shape=2,4 must be 4 positive sizes'):
    half_precision.check_settings(half_precision.HalfPrecisionSettings(input_shape=(2, 4)))
