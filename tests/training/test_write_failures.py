"""A train_dir on a full or read-only filesystem: one line, the last good checkpoint named,
no temporary files left, and the same command resumes once there is room. The command is
train_image_classifier.py's main, called in this process (tests/entries.py).

The filesystems are small tmpfs mounts (this machine runs the tests as root; a read-only
train_dir is a read-only mount, since root ignores file modes)."""

import contextlib
import logging
import os
import subprocess

import pytest

from checkpoints import paths
from tests.entries import train_main


@contextlib.contextmanager
def tmpfs(path, size):
  os.makedirs(path)
  subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%s' % size, 'tmpfs', path], check=True)
  try:
    yield path
  finally:
    subprocess.run(['umount', '-l', path], check=False)


def train(capsys, digits_dir, train_dir, steps, *flags):
  """(exit status, what it printed on stderr) of the training command."""
  status = train_main(
      ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
       '--train_dir=%s' % train_dir, '--max_number_of_steps=%d' % steps, '--batch_size=8',
       '--num_readers=1', '--num_preprocessing_threads=1', '--save_summaries_secs=600',
       '--optimizer=sgd'] + list(flags))
  return status, capsys.readouterr().err


@pytest.mark.slow
def test_a_full_disk_names_the_last_good_checkpoint_and_a_restart_resumes(
    digits_dir, tmp_path, capsys, caplog):
  """LeNet's checkpoint is about 13 MB: 20 MB hold the first (step 1, a save due at every
  step), not the second."""
  caplog.set_level(logging.INFO)
  with tmpfs(str(tmp_path / 'disk'), '20m') as train_dir:
    status, stderr = train(capsys, digits_dir, train_dir, 3, '--save_interval_steps=1')
    assert status == 6, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith('error:')]
    assert 'Traceback' not in stderr
    assert len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith('error: could not write %s/model.ckpt-2' % train_dir)
    assert ('(No space left on device); the last good checkpoint is %s/model.ckpt-1'
            % train_dir) in errors[0]
    assert errors[0].endswith('free space and run the same command again to resume from it')
    assert not [n for n in os.listdir(train_dir) if 'tempstate' in n or '.tmp-' in n]
    subprocess.run(['mount', '-o', 'remount,size=80m', train_dir], check=True)
    caplog.clear()
    status, stderr = train(capsys, digits_dir, train_dir, 3)
    assert status == 0, stderr[-3000:]
    assert 'Resuming from %s/model.ckpt-1' % train_dir in caplog.text
    assert paths.latest_checkpoint(train_dir) == '%s/model.ckpt-3' % train_dir


def test_a_read_only_train_dir_is_one_line(digits_dir, tmp_path, capsys):
  with tmpfs(str(tmp_path / 'ro'), '1m') as train_dir:
    subprocess.run(['mount', '-o', 'remount,ro', train_dir], check=True)
    status, stderr = train(capsys, digits_dir, train_dir, 2)
  assert status == 6, stderr[-3000:]
  assert 'Traceback' not in stderr
  errors = [line for line in stderr.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and '(Read-only file system)' in errors[0], stderr[-3000:]
  assert 'no checkpoint was saved yet; mount it writable and run the same command again' \
      in errors[0]
