"""Tests of core/errors.py: one exit-status table, one `error:` line per reported error."""

import errno
import json
import os
import subprocess
import sys

import pytest

from core import errors
from core.params import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_statuses_are_distinct_and_data_errors_are_neither_a_bug_nor_usage():
  statuses = [errors.OK, errors.BUG, errors.USAGE, errors.DATA, errors.INCOMPLETE,
              errors.BELOW_TARGET, errors.IO, errors.DIVERGED, errors.CLUSTER]
  assert len(set(statuses)) == len(statuses) == len(errors.TABLE)
  assert (errors.OK, errors.BUG, errors.USAGE, errors.CLUSTER) == (0, 1, 2, 138)
  assert errors.DATA not in (errors.BUG, errors.USAGE)
  assert ConfigError is errors.ConfigError  # core.params keeps exporting it


@pytest.mark.parametrize('error, status', [
    (errors.ConfigError('--x=1 must be >= 2'), errors.USAGE),
    (errors.DataError('a.tfrecord is damaged'), errors.DATA),
    (errors.TrainingDiverged('training diverged: ...'), errors.DIVERGED),
    (OSError(errno.ENOSPC, 'No space left on device'), errors.IO)])
def test_report_prints_one_line_and_returns_the_status(capsys, error, status):
  assert errors.report(error) == status
  lines = capsys.readouterr().err.splitlines()
  assert lines == ['error: %s' % error]


def test_report_refuses_what_has_no_status():
  with pytest.raises(TypeError):
    errors.report(KeyError('bug'))


# Every entry point and tool, with a user mistake each, run in ONE child process (a process
# per entry would cost a TensorFlow start each): each entry's flags are defined by running
# its file, parsed, its main called, then removed before the next entry defines its own.
# The video dataset given to convert_images and export's missing checkpoint are mistakes
# of value, not only of absence; the demo is refused before it writes anything.
_MISTAKES = [
    ('train_image_classifier.py', []),
    ('eval.py', []),
    ('export.py', []),
    ('export.py', ['--checkpoint_path={tmp}/none', '--export_dir={tmp}/models']),
    ('predict.py', []),
    ('demo.py', ['--min_accuracy=2', '--output_dir={tmp}/demo']),
    ('datasets.convert_images', []),
    ('datasets.convert_images', ['--dataset_name=ucf101', '--output_dir={tmp}/out']),
    ('datasets.convert_videos', []),
    ('datasets.make_synthetic_videos', []),
    ('datasets.verify_records', []),
    ('datasets.migrate_video_records', []),
    ('datasets.export_media_sequence', []),
    ('nets.inflate', []),
    ('deployment.launch_local', []),
    ('training.doctor', []),
]

_EACH_ENTRY = """
import contextlib, io, json, runpy, sys
from absl import app, flags, logging  # Their flags stay: defined before any entry's.
from core.params import parse_flags
results = []
for target, argv in json.loads(sys.argv[1]):
  before, err = set(flags.FLAGS), io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    run = runpy.run_path if target.endswith('.py') else runpy.run_module
    main = run(target, run_name='entry_under_test')['main']
    try:
      status = main(parse_flags([target] + argv))
    except SystemExit as exit:
      status = exit.code
  flags.FLAGS.unparse_flags()
  for name in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, name)
  results.append([target, argv, status, err.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope='module')
def mistakes(tmp_path_factory):
  tmp = str(tmp_path_factory.mktemp('mistakes'))
  cases = [[target, [word.format(tmp=tmp) for word in argv]] for target, argv in _MISTAKES]
  result = subprocess.run([sys.executable, '-c', _EACH_ENTRY, json.dumps(cases)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                          text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.splitlines()[-1])


def test_every_entry_and_tool_reports_a_mistake_in_one_lowercase_error_line(mistakes):
  assert [target for target, _, _, _ in mistakes] == [t for t, _ in _MISTAKES]
  for target, argv, status, stderr in mistakes:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert status == errors.USAGE, (target, argv, status, stderr)
    assert lines and lines[-1].startswith('error: '), (target, argv, stderr)
    assert [line for line in lines if line.lower().startswith('error')] == [lines[-1]], (
        target, argv, stderr)
    assert 'Traceback' not in stderr, (target, stderr)
