"""`python -m training.doctor` as its main runs it, in the test's own process: the digits
recipe's flagfile read as the doctor reads it (core.params.config_from_argv), doctor_setup
and run_doctor; what it prints and writes. Its contract, in a fresh process: a bad doctor
flag is one `error:` line and exit status 2."""

import io
import json
import os

import pytest

from core.params import config_from_argv
from tests.entries import ROOT, run_entry
from training.config import TrainConfig
from training.doctor.diagnosis import doctor_setup, run_doctor
from training.doctor.settings import DoctorSettings, check_settings


@pytest.mark.slow
def test_the_recipe_flagfile_gives_a_table_a_verdict_and_the_files(digits_dir, tmp_path,
                                                                   monkeypatch):
  monkeypatch.chdir(ROOT)   # the recipe names its base flagfile from the repository root
  config, _ = config_from_argv(TrainConfig, [
      '--flagfile=configs/digits_lenet_2xcpu.cfg', '--dataset_dir=%s' % digits_dir,
      '--train_dir=%s' % (tmp_path / 'train')])
  settings, _ = config_from_argv(DoctorSettings, [
      '--doctor_rounds=2', '--doctor_steps=3', '--doctor_warmup_steps=1'])
  stream = io.StringIO()
  run_doctor(doctor_setup(config), check_settings(settings), stream=stream)
  out = stream.getvalue()
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
  """The doctor's contract, in a fresh process."""
  result = run_entry(['-m', 'training.doctor', '--doctor_steps=0',
                      '--train_dir=%s' % tmp_path])
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == 'error: --doctor_steps=0 must be >= 1'
