"""The doctor with --data_service_address, against a real tf.data service (a dispatcher and
one data worker, tests/data_service.py): its input and full step read the data worker's
batches, each from a job of its own, each timed round starts with a lead-in that takes what the worker buffered, and
the verdict is the doctor's as without a service. (The service-fed verdict against local
input on one core is benchmarks.data_service's, docs/benchmarks.md.)"""

import os

import pytest

from tests.data_service import DataService
from training.config import TrainConfig
from training.doctor import diagnosis, measure, verdicts
from training.doctor.settings import DoctorSettings
from training.setup import check_train_config

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _journal_bytes(directory):
  found = b''
  for root, _, files in os.walk(directory):
    for name in files:
      with open(os.path.join(root, name), 'rb') as handle:
        found += handle.read()
  return found


def test_the_doctor_times_input_read_from_a_real_data_worker(digits_dir, tmp_path):
  with DataService(tmp_path / 'service', num_workers=1) as service:
    config = TrainConfig(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                         train_dir=str(tmp_path / 'train'), batch_size=8, optimizer='sgd',
                         learning_rate_decay_type='fixed', num_readers=1,
                         num_preprocessing_threads=1, data_service_address=service.address)
    assert measure.buffered_batches(check_train_config(config)) == measure.SERVICE_BUFFER
    result = diagnosis.diagnose(diagnosis.doctor_setup(config), DoctorSettings(
        doctor_rounds=2, doctor_steps=3, doctor_warmup_steps=1))
    journal = _journal_bytes(os.path.join(service.directory, 'work'))
  # The dispatcher's journal holds a job of its own for the input and for the full step
  # (one shared job would let the idle iterator take batches from the timed one).
  for component in (measure.INPUT, measure.FULL):
    job = 'train %s, doctor: %s' % (tmp_path / 'train', component)
    assert job.encode() in journal, job
  rows = {m.component: m for m in result.measurements}
  assert all(m.examples_per_sec and len(m.round_rates) == 2 for m in rows.values())
  assert rows[measure.FULL].input_wait_share is not None
  assert result.verdict.name in verdicts.VERDICTS
