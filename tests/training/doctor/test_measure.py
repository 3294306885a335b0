"""training/doctor/measure.py with --variable_update=replicated (issue 40): every clone
count the doctor times is deployed as the trainer's flags say, the copies start from
clone 0's values, and `run_doctor` reports which variable update ran."""

import dataclasses

import numpy as np
import pytest

from datasets.inputs.synthetic_input import SyntheticInput
from training.config import TrainConfig
from training.doctor import diagnosis, measure
from training.doctor.settings import DoctorSettings
from training.setup import check_train_config
from tf_compat import tf

pytestmark = pytest.mark.slow

ONE_STEP = DoctorSettings(doctor_rounds=1, doctor_steps=1, doctor_warmup_steps=0)


def _setup(digits_dir, tmp_path, **overrides):
  values = dict(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                train_dir=str(tmp_path / 'train'), num_clones=2, clone_on_cpu=True,
                batch_size=4, optimizer='sgd', learning_rate_decay_type='fixed',
                num_readers=1, num_preprocessing_threads=1)
  values.update(overrides)
  setup = check_train_config(TrainConfig(**values))
  return dataclasses.replace(setup, input=SyntheticInput(setup.input))


@pytest.mark.parametrize('update, collectives', [('parameter_server', 0),
                                                 ('replicated', 3)])
def test_every_clone_count_keeps_the_variable_update(digits_dir, tmp_path, update,
                                                     collectives):
  setup = _setup(digits_dir, tmp_path, variable_update=update, gradient_repacking=3)
  for count in (1, 2):
    clones = measure.with_clones(setup, count, synthetic=True)
    assert clones.deploy_config.variable_update == update
    assert clones.deploy_config.gradient_repacking == 3
  component = measure.step_component(measure.with_clones(setup, 2, synthetic=True))
  reduces = [op for op in component.graph.get_operations()
             if op.type.startswith('CollectiveReduce')]
  # One collective per pack (LeNet: one dtype, 3 packs) in each of the 2 clones.
  assert len(reduces) == 2 * collectives


def test_the_copies_start_from_clone_0s_values(digits_dir, tmp_path):
  setup = _setup(digits_dir, tmp_path, variable_update='replicated')
  component = measure.step_component(setup)
  with tf.Session(graph=component.graph, config=component.session_config) as session:
    for op in component.init:
      session.run(op)
    variables = {v.op.name: v for v in component.graph.get_collection(
        tf.GraphKeys.GLOBAL_VARIABLES) + component.graph.get_collection(
            tf.GraphKeys.LOCAL_VARIABLES)}
    weights = session.run(variables['LeNet/fc4/weights'])
    copy = session.run(variables['clone_1/LeNet/fc4/weights'])
  assert weights.std() > 0
  np.testing.assert_array_equal(copy, weights)


def test_the_report_says_replicated_with_its_repacking(digits_dir, tmp_path, capsys):
  setup = _setup(digits_dir, tmp_path, variable_update='replicated', gradient_repacking=2)
  settings = dataclasses.replace(ONE_STEP, doctor_dir=str(tmp_path / 'out'))
  result = diagnosis.run_doctor(setup, settings)
  assert result.run['variable_update'] == 'replicated'
  assert result.run['gradient_repacking'] == 2
  assert ('Variable update: replicated (a copy of the variables per clone, the gradients '
          'all-reduced in 2 pack(s): --gradient_repacking=2)') in capsys.readouterr().out
  for m in result.measurements:
    assert m.error is None and m.examples_per_sec > 0, m
