"""`python -m datasets.convert_videos` as users run it: exit statuses, the summary line, and
decoding processes that do not import TensorFlow.

The command lines run in this process as the tool's main runs them (tests/entries.py);
the tool itself is started once, for an output that cannot be written (its status and
line), and the decoding processes' probe imports no TensorFlow.

The conversion itself is tested in tests/datasets/conversion/test_convert_videos.py.
"""

import os
import subprocess
import sys

import pytest

from core import errors
from datasets.conversion import convert_videos
from datasets.conversion.convert_videos_config import (VideoConversion,
                                                         with_task_from_environment)
from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
from tests import entries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='module')
def videos_with_an_empty_one(tmp_path_factory):
  """8 small synthetic videos, and an empty file listed in the train list."""
  root = str(tmp_path_factory.mktemp('videos'))
  made = make_synthetic_videos(root, num_classes=2, videos_per_class=4, min_frames=1,
                               max_frames=6, sizes=((32, 48),), seed=1)
  class_name = made['class_names'][0]
  open(os.path.join(made['video_dir'], class_name, 'v_empty_g09_c01.avi'), 'wb').close()
  with open(os.path.join(made['split_dir'], 'trainlist01.txt'), 'a', newline='') as lists:
    lists.write('%s/v_empty_g09_c01.avi 1\r\n' % class_name)
  return made


def _flags(made, output_dir, *flags):
  return ['--dataset_name=video_folder', '--video_dir=' + made['video_dir'],
          '--splits_dir=' + made['split_dir'], '--output_dir=%s' % output_dir,
          '--short_side=32', '--num_shards=1', '--num_processes=2', *flags]


def _convert(made, output_dir, *flags):
  """The command line in this process, as the tool's main runs it -> (status, manifest)."""
  return entries.call(
      VideoConversion, _flags(made, output_dir, *flags),
      lambda config: convert_videos.convert_videos(
          with_task_from_environment(config, os.environ)))


@pytest.mark.slow
def test_skipped_videos_exit_4_and_strict_exits_3_in_one_line(videos_with_an_empty_one,
                                                              tmp_path, capsys):
  output_dir = str(tmp_path / 'out')
  status, manifest = _convert(videos_with_an_empty_one, output_dir)
  assert status == errors.OK and manifest['skipped']  # main: INCOMPLETE (4) with skips
  print(convert_videos.summary_line(manifest, output_dir))   # what main prints
  result = capsys.readouterr()
  lines = [line for line in result.out.splitlines() if line.strip()]
  assert len(lines) == 1 and 'skipped 1: ' in lines[0] and 'v_empty_g09_c01' in lines[0]
  # stderr is not a terminal, as in a pod's log: progress lines, one every few videos.
  progress = [line for line in result.err.splitlines() if line.startswith('converting: ')]
  assert progress and progress[-1].startswith('converting: %d/%d videos (100%%)' % (
      len(videos_with_an_empty_one['videos']) + 1, len(videos_with_an_empty_one['videos']) + 1))
  assert '1 skipped, done in' in progress[-1]
  status, _ = _convert(videos_with_an_empty_one, tmp_path / 'strict', '--strict')
  strict = capsys.readouterr().err
  assert status == errors.DATA, strict
  errors_printed = [line for line in strict.splitlines() if not line.startswith('converting: ')]
  assert errors_printed == [
      'error: --strict: stopped at a bad video: %s/v_empty_g09_c01.avi: %s'
      % (videos_with_an_empty_one['class_names'][0],
         strict.split('v_empty_g09_c01.avi: ', 1)[1].strip())]
  assert not os.path.exists(tmp_path / 'strict' / 'dataset_info.json')


def test_usage_errors_exit_2_in_one_line(videos_with_an_empty_one, tmp_path, capsys):
  status, _ = _convert(videos_with_an_empty_one, tmp_path / 'out', '--modality=depth')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      'error: --modality=depth is not known; valid: rgb, flow']
  status, _ = _convert(videos_with_an_empty_one, tmp_path / 'out', 'extra')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]


def test_an_output_that_cannot_be_written_exits_6_in_one_line(videos_with_an_empty_one,
                                                               tmp_path):
  """The tool's contract, in its own process: status and one `error:` line."""
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  command = [sys.executable, '-m', 'datasets.convert_videos',
             *_flags(videos_with_an_empty_one, blocker / 'out')]
  unwritable = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert unwritable.returncode == 6, unwritable.stderr  # IO
  assert unwritable.stderr.startswith('error: conversion into %s failed: ' % (blocker / 'out'))
  assert len(unwritable.stderr.strip().splitlines()) == 1


def test_decoding_processes_do_not_import_tensorflow():
  """Each decoding process starts by importing the tool's module again (spawn) as its
  main; with the work module's imports there it imported TensorFlow (5.3 s a process)."""
  probe = (
      'import sys\n'
      'import datasets.convert_videos as tool\n'
      'sys.modules["__main__"] = tool  # as under python -m datasets.convert_videos\n'
      'from datasets.conversion.timed_pool import run_tasks\n'
      'from tests.datasets.worker_probe import process_view\n'
      'print(sorted(run_tasks(process_view, [0, 1], num_processes=2, timeout=120)))\n'
      'print("tensorflow" in sys.modules)\n')
  result = subprocess.run([sys.executable, '-c', probe], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=REPO))
  assert result.returncode == 0, result.stderr
  views, parent_has_tensorflow = result.stdout.strip().splitlines()
  # Sorted: the two processes finish in either order.
  assert views == str([(0, ('datasets.convert_videos', False)),
                       (1, ('datasets.convert_videos', False))])
  assert parent_has_tensorflow == 'False'  # Only main() imports the TensorFlow side.
