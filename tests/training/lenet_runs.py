"""LeNet trainings on the converted digits, as the training tests run them (test_train,
test_summaries, doctor/test_diagnosis, checkpoints/test_portable), and what they read back:
checkpoint values, events, the session's values at the first step."""

import glob
import os
import threading

import pytest

from tf_compat import tf, slim
import training.train as train_module
from training.config import TrainConfig
from training.input_position import is_input_position
from training.progress import ProgressStep

LENET_VARIABLES = (
    'LeNet/conv1/weights', 'LeNet/conv1/biases', 'LeNet/conv2/weights',
    'LeNet/conv2/biases', 'LeNet/fc3/weights', 'LeNet/fc3/biases', 'LeNet/fc4/weights',
    'LeNet/fc4/biases')
TRAIN_TIMEOUT_SECS = 180


def make_config(digits_dir, train_dir, **overrides):
  values = dict(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      train_dir=str(train_dir), num_clones=2, clone_on_cpu=True, max_number_of_steps=20,
      optimizer='sgd', learning_rate=0.01, learning_rate_decay_type='fixed',
      num_readers=1, num_preprocessing_threads=1, batch_size=16, log_every_n_steps=5,
      save_summaries_secs=600, save_interval_secs=600)
  values.update(overrides)
  return TrainConfig(**values)


def train_with_timeout(config, timeout=TRAIN_TIMEOUT_SECS, stop_event=None):
  """train(config) in a daemon thread: a hang (slim's final save on TF 2.10) fails the
  test instead of blocking the whole run."""
  outcome = {}

  def target():
    try:
      outcome['result'] = train_module.train(config, stop_event)
    except BaseException as error:  # pylint: disable=broad-except
      outcome['error'] = error

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(timeout)
  if thread.is_alive():
    pytest.fail('training did not finish within %d s (hang?)' % timeout)
  if 'error' in outcome:
    raise outcome['error']
  return outcome['result']


def checkpoint_values(path):
  """{variable name: value} of a checkpoint (its input position left out)."""
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if not is_input_position(name)}


def event_tags(directory):
  """{tag: [(step, simple_value)]} over every events file of `directory`."""
  tags = {}
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append((event.step, value.simple_value))
  return tags


class FirstStepSpy(ProgressStep):
  """ProgressStep that records, at its first call and before any update, the global step
  and the value of every model variable in the training session; counts calls."""

  instances = []

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.calls = 0
    self.start_values = None
    self.start_step = None
    FirstStepSpy.instances.append(self)

  def __call__(self, sess, train_op, global_step, train_step_kwargs):
    if self.calls == 0:
      variables = slim.get_model_variables()
      values = sess.run(variables)
      self.start_values = {v.op.name: value for v, value in zip(variables, values)}
      self.start_step = int(sess.run(global_step))
    self.calls += 1
    return super().__call__(sess, train_op, global_step, train_step_kwargs)


def spy_on_first_step(monkeypatch):
  """Installs FirstStepSpy as train()'s step fn; returns a getter of the last one."""
  FirstStepSpy.instances = []
  monkeypatch.setattr(train_module, 'ProgressStep', FirstStepSpy)
  return lambda: FirstStepSpy.instances[-1]
