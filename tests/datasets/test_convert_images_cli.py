"""`python -m datasets.convert_images` as users run it: exit codes and what they read.

The command lines run in this process as the tool's main runs them (tests/entries.py);
one test starts the tool itself: the status and the one line of an output that cannot be
written.
"""

import os
import subprocess
import sys

import pytest

from core import errors
from datasets.conversion import convert_images
from datasets.conversion.convert_images import ImageConversion
from tests import entries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(REPO, '.venv', 'bin', 'python')


def _call(*flags):
  return entries.call(ImageConversion, flags, convert_images.convert_images)


@pytest.mark.parametrize('flags, message', [
    (['--dataset_name=mnist'], "error: dataset_name 'mnist' is not a known dataset; valid "
                               'names: digits, hmdb51, image_folder, ucf101, video_folder'),
    (['--dataset_name=image_folder'], 'error: --image_dir is required'),
])
def test_user_errors_print_one_line_and_exit_2(tmp_path, capsys, flags, message):
  output_dir = str(tmp_path / 'out')
  status, _ = _call(*flags, '--output_dir=' + output_dir)
  printed = capsys.readouterr()
  assert status == errors.USAGE
  assert printed.err.startswith(message)
  assert len(printed.err.strip().splitlines()) == 1
  assert 'Traceback' not in printed.err + printed.out
  assert not os.path.exists(output_dir)


def test_missing_image_dir_path(tmp_path, capsys):
  missing = str(tmp_path / 'no_such_tree')
  status, _ = _call('--dataset_name=image_folder', '--image_dir=' + missing,
                    '--output_dir=' + str(tmp_path / 'out'))
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      'error: --image_dir=%s does not exist or is not a directory' % missing]
  assert not os.path.exists(tmp_path / 'out')


def test_image_folder_lists_skipped_files_and_sums_up(image_tree, tmp_path, capsys):
  image_dir, _, bad = image_tree
  status, result = _call('--dataset_name=image_folder', '--image_dir=' + image_dir,
                         '--output_dir=' + str(tmp_path / 'out'), '--num_shards=2')
  assert status == errors.OK and result.skipped   # main: INCOMPLETE (4) when files skipped,
  convert_images.print_summary(result)           # as convert_videos with skips
  printed = capsys.readouterr()
  skipped = [line for line in printed.err.splitlines() if line.startswith('skipped ')]
  assert sorted(line.split(': ')[0][len('skipped '):] for line in skipped) == sorted(bad)
  assert printed.out.strip().splitlines() == [
      'converted image_folder into %s: train 8, test 2 records, 3 classes; skipped 3 '
      'unreadable file(s), listed above' % (tmp_path / 'out')]


def test_an_output_that_cannot_be_written_exits_6_with_one_line(tmp_path):
  """The tool's contract, in its own process: status and one `error:` line."""
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  python = PYTHON if os.path.exists(PYTHON) else sys.executable
  result = subprocess.run([python, '-m', 'datasets.convert_images', '--dataset_name=digits',
                           '--output_dir=%s' % (blocker / 'out')], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 6, result.stderr  # IO in core/errors.py's table
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: conversion into %s' % (blocker / 'out'))


def test_positional_arguments_are_refused_in_one_line(tmp_path, capsys):
  status, _ = _call('--dataset_name=digits', '--output_dir=%s' % tmp_path, 'extra')
  assert status == errors.USAGE
  assert capsys.readouterr().err.strip().splitlines() == [
      "error: unexpected arguments ['extra'] (flags look like --name=value)"]
