"""The doctor's three verdict tests (issue 12), on LeNet and converted digits.

Timings on this shared machine move by tens of percent, so each contrast is built in:
the starved pipeline sleeps a quarter of a second per batch of 8 (at most 32 examples/sec,
where LeNet's step takes hundreds), the synthetic input does no work at all, and the wrong
session config leaves the second clone no device of its own. Few steps are timed: the
margins, not the step counts, make the verdicts stable.
"""

import dataclasses
import os

import pytest

from datasets.inputs.synthetic_input import SyntheticInput
from deployment.session.session_config import make_session_config
from datasets.inputs import input_factory
from tests.training.starved_input import StarvedInput, starve_training
from tests.training.test_summaries import wait_shares
from tests.training.lenet_runs import train_with_timeout
from training.config import TrainConfig
from training.doctor import diagnosis, measure, verdicts
from training.doctor.measure import FULL, INPUT, SYNTHETIC
from training.doctor.settings import DoctorSettings
from training.setup import check_train_config

pytestmark = [pytest.mark.slow, pytest.mark.timing]

SLEEP_SECS = 0.25
BATCH = 8
SETTINGS = DoctorSettings(doctor_rounds=2, doctor_steps=3, doctor_warmup_steps=1)


@pytest.fixture(autouse=True)
def _no_lead_in(monkeypatch):
  """No untimed lead-in before each round: the starved pipeline makes a batch in 0.25 s, so
  a lead-in of measure.LOCAL_BUFFER batches cost these tests 27 s (at 0.5 s a batch), and
  their margins held without one (tests/training/doctor/test_data_service.py runs a lead-in)."""
  monkeypatch.setattr(measure, 'LOCAL_BUFFER', 0)


def _config(digits_dir, tmp_path, **overrides):
  values = dict(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                train_dir=str(tmp_path / 'train'), num_clones=1, clone_on_cpu=True,
                batch_size=BATCH, optimizer='sgd', learning_rate_decay_type='fixed',
                num_readers=1, num_preprocessing_threads=1)
  values.update(overrides)
  return TrainConfig(**values)


def _rates(result):
  return {(m.component, m.num_clones): m.examples_per_sec for m in result.measurements}


def test_a_starved_pipeline_is_input_bound(digits_dir, tmp_path):
  config = _config(digits_dir, tmp_path)
  setup = check_train_config(config)
  setup = dataclasses.replace(setup, input=StarvedInput(setup.input, SLEEP_SECS))
  result = diagnosis.diagnose(setup, SETTINGS)
  rates = _rates(result)
  assert rates[(INPUT, None)] < 1.2 * BATCH / SLEEP_SECS
  assert rates[(INPUT, None)] < 0.25 * rates[(SYNTHETIC, 1)], rates   # far below 0.8
  assert rates[(FULL, 1)] < 1.2 * BATCH / SLEEP_SECS
  assert result.verdict.name == verdicts.INPUT_BOUND, result.verdict
  assert '--num_preprocessing_threads' in result.verdict.flags


def test_an_in_graph_synthetic_input_is_compute_bound(digits_dir, tmp_path):
  config = _config(digits_dir, tmp_path)
  setup = check_train_config(config)
  setup = dataclasses.replace(setup, input=SyntheticInput(setup.input))
  result = diagnosis.diagnose(setup, SETTINGS)
  rates = _rates(result)
  assert rates[(INPUT, None)] > 5 * rates[(SYNTHETIC, 1)], rates   # far above 0.8
  assert result.verdict.name == verdicts.COMPUTE_BOUND, result.verdict
  assert [p.device.endswith('/device:CPU:0') for p in result.placements] == [True]


def test_two_clones_given_one_cpu_device_are_reported_sharing_it(digits_dir, tmp_path):
  """The wrong config: 2 clones on CPU asked for, every session declares 1 CPU device."""
  config = _config(digits_dir, tmp_path, num_clones=2)
  result = diagnosis.diagnose(diagnosis.doctor_setup(config), SETTINGS,
                               session_config=make_session_config(None))
  assert result.devices.count('CPU') == 1
  devices = [p.device for p in result.placements]
  assert len(devices) == 2 and devices[0] == devices[1]
  assert devices[0].endswith('/device:CPU:0')
  assert result.verdict.name == verdicts.CLONE_OVERHEAD, result.verdict
  assert 'clones share a device' in result.verdict.reason
  assert [p.asked for p in result.placements] == ['/device:CPU:0', '/device:CPU:1']


def test_run_doctor_prints_the_table_and_writes_it_with_the_plot(digits_dir, tmp_path,
                                                                 capsys):
  config = _config(digits_dir, tmp_path, num_clones=2)
  settings = dataclasses.replace(SETTINGS, doctor_dir=str(tmp_path / 'out'))
  setup = check_train_config(config)
  setup = dataclasses.replace(setup, input=SyntheticInput(setup.input))
  result = diagnosis.run_doctor(setup, settings)
  printed = capsys.readouterr().out
  assert 'Verdict: %s' % result.verdict.name in printed
  assert 'SHARED' not in printed   # the right config: one logical CPU per clone
  for name in ('doctor.txt', 'doctor.json', 'doctor.png'):
    assert os.path.getsize(str(tmp_path / 'out' / name)) > 0
  with open(str(tmp_path / 'out' / 'doctor.png'), 'rb') as handle:
    assert handle.read(8) == b'\x89PNG\r\n\x1a\n'


def test_the_doctor_and_the_progress_lines_agree_on_the_input(digits_dir, tmp_path,
                                                              monkeypatch):
  """The doctor's verdict, its full step's input wait and a training's progress lines of
  the same settings (2 clones), on digits and on digits starved (a 0.25 s sleep per
  batch): the doctor says input-bound for the starved input alone, and every wait figure
  of the starved input, the doctor's and the progress lines', is above every one of the
  other (compared with each other, not with a fixed share)."""
  def measure(name, starved):
    """-> (the doctor's verdict, the progress lines' wait shares + the doctor's)."""
    config = _config(digits_dir, tmp_path / name, num_clones=2, max_number_of_steps=7,
                     log_every_n_steps=2, save_interval_secs=600)
    setup = check_train_config(config)
    if starved:
      setup = dataclasses.replace(setup, input=StarvedInput(setup.input, SLEEP_SECS))
      starve_training(monkeypatch, input_factory.IMAGE, SLEEP_SECS)
    result = diagnosis.diagnose(setup, SETTINGS)
    doctor_wait = next(m.input_wait_share for m in result.measurements
                       if m.component == FULL)
    train_with_timeout(config)
    return result.verdict, wait_shares(tmp_path / name / 'train') + [doctor_wait]
  plain_verdict, plain = measure('digits', starved=False)
  starved_verdict, starved = measure('starved', starved=True)
  assert len(plain) == len(starved) == 3
  assert plain_verdict.name != verdicts.INPUT_BOUND, plain_verdict
  assert starved_verdict.name == verdicts.INPUT_BOUND, starved_verdict
  assert min(starved) > max(plain), (starved, plain)
