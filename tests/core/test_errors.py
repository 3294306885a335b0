"""Tests of core/errors.py: one exit-status table, one `error:` line per reported error."""

import errno

import pytest

from core import errors
from core.params import ConfigError


def test_statuses_are_distinct_and_data_errors_are_neither_a_bug_nor_usage():
  statuses = [errors.OK, errors.BUG, errors.USAGE, errors.DATA, errors.INCOMPLETE,
              errors.BELOW_TARGET, errors.IO, errors.CLUSTER]
  assert len(set(statuses)) == len(statuses) == len(errors.TABLE)
  assert (errors.OK, errors.BUG, errors.USAGE, errors.CLUSTER) == (0, 1, 2, 138)
  assert errors.DATA not in (errors.BUG, errors.USAGE)
  assert ConfigError is errors.ConfigError  # core.params keeps exporting it


@pytest.mark.parametrize('error, status', [
    (errors.ConfigError('--x=1 must be >= 2'), errors.USAGE),
    (errors.DataError('a.tfrecord is damaged'), errors.DATA),
    (OSError(errno.ENOSPC, 'No space left on device'), errors.IO)])
def test_report_prints_one_line_and_returns_the_status(capsys, error, status):
  assert errors.report(error) == status
  lines = capsys.readouterr().err.splitlines()
  assert lines == ['error: %s' % error]


def test_report_refuses_what_has_no_status():
  with pytest.raises(TypeError):
    errors.report(KeyError('bug'))
