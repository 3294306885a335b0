"""deployment.session.precision_options.half_precision_device_warning: the one line of
float16 on a CPU, keyed on the device and the dtype alone."""

import pytest

from deployment.session.precision_options import PRECISIONS, half_precision_device_warning


def test_float16_on_a_cpu_names_its_cost_and_the_flags_to_use():
  line = half_precision_device_warning('float16', 'CPU')
  assert line.startswith('--mixed_precision=float16 on a CPU: ')
  assert '280x' in line and 'AMD EPYC' in line and 'Intel Xeon' in line
  assert '--mixed_precision=bfloat16' in line and line.endswith('or float32')
  assert '\n' not in line


@pytest.mark.parametrize('mixed_precision', PRECISIONS)
def test_nothing_on_a_gpu_nor_for_the_other_precisions_on_a_cpu(mixed_precision):
  assert half_precision_device_warning(mixed_precision, 'GPU') is None
  if mixed_precision != 'float16':
    assert half_precision_device_warning(mixed_precision, 'CPU') is None
