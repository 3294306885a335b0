"""`python -m training.doctor` as a user runs it: the digits recipe's flagfile, its exit
statuses, what it prints and writes."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _doctor(*flags):
  return subprocess.run([sys.executable, '-m', 'training.doctor'] + list(flags), cwd=ROOT,
                        env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                        text=True, timeout=300)


@pytest.mark.slow
def test_the_recipe_flagfile_gives_a_table_a_verdict_and_the_files(digits_dir, tmp_path):
  result = _doctor('--flagfile=configs/digits_lenet_2xcpu.cfg',
                   '--dataset_dir=%s' % digits_dir, '--train_dir=%s' % (tmp_path / 'train'),
                   '--doctor_rounds=2', '--doctor_steps=3', '--doctor_warmup_steps=1')
  assert result.returncode == 0, result.stderr
  out = result.stdout
  assert 'Doctor: lenet on digits/train, batch 32 per clone, 2 clone(s)' in out
  assert 'clone 0: asked /device:CPU:0, ran on /device:CPU:0' in out
  assert 'clone 1: asked /device:CPU:1, ran on /device:CPU:1' in out
  assert 'SHARED' not in out
  directory = tmp_path / 'train' / 'doctor'
  with open(str(directory / 'doctor.json')) as handle:
    data = json.load(handle)
  assert 'Verdict: %s' % data['verdict']['name'] in out
  assert [(m['component'], m['num_clones']) for m in data['measurements']] == [
      ('input pipeline alone', None), ('model, synthetic data', 1),
      ('model, synthetic data', 2), ('full training step', 2)]
  assert 'Wrote %s' % (directory / 'doctor.txt') in out
  assert os.path.getsize(str(directory / 'doctor.png')) > 0


def test_a_bad_doctor_flag_is_one_error_line_and_status_2(tmp_path):
  result = _doctor('--doctor_steps=0', '--train_dir=%s' % tmp_path)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == 'error: --doctor_steps=0 must be >= 1'
