"""The doctor's timings, each in a graph and a session of its own.

  input pipeline alone    the training input's batches pulled on the input device, nothing
                          else: examples/sec the data can be made at.
  model, synthetic data   the trainer's own graph (`build_training_graph`) with n clones, its
                          input replaced by `SyntheticInput` (one batch of zeros): forward,
                          backward, gradient sum and update, without the pipeline's work.
  full training step      the trainer's graph as the flags build it; one more step is traced
                          (FULL_TRACE) for `deployment.placement`.

Rates count every clone's examples: batch_size x clones x steps / seconds. A count that
runs out of memory (ResourceExhaustedError) is a measurement with an error, not a crash:
it is what the memory verdict reads. Any other error raises.
"""

import dataclasses
import time
from typing import Optional

from absl import logging

from datasets.inputs.synthetic_input import SyntheticInput
from deployment import model_deploy
from deployment.session_config import make_session_config
from tf_compat import tf
from training import optimization
from training.train import build_training_graph

__all__ = ['INPUT', 'SYNTHETIC', 'FULL', 'Measurement', 'session_config_for', 'time_input',
           'time_step', 'with_clones']

INPUT = 'input pipeline alone'
SYNTHETIC = 'model, synthetic data'
FULL = 'full training step'


@dataclasses.dataclass(frozen=True)
class Measurement:
  """One timing.

  Attributes:
    component: INPUT, SYNTHETIC or FULL.
    num_clones: clones of the step; None for the input pipeline alone.
    examples_per_sec: examples (every clone's) per second; None when it failed.
    seconds_per_step: seconds per step (per batch for the input); None when it failed.
    error: why it failed ('out of memory: ...'), or None.
  """
  component: str
  num_clones: Optional[int]
  examples_per_sec: Optional[float]
  seconds_per_step: Optional[float]
  error: Optional[str] = None


def session_config_for(config, deploy_config):
  """The session config training would use for `deploy_config` (GPU options from config)."""
  return make_session_config(deploy_config, gpu_allow_growth=config.gpu_allow_growth,
                             gpu_memory_fraction=config.gpu_memory_fraction)


def with_clones(config, setup, num_clones, synthetic):
  """(config, setup) of one worker with `num_clones` clones, on SyntheticInput if asked.

  The deployment keeps the config's clone_on_cpu; the global batch and the schedule's
  steps follow the clone count as check_train_config would compute them.
  """
  config = dataclasses.replace(config, num_clones=num_clones)
  deploy_config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                                clone_on_cpu=config.clone_on_cpu)
  setup = dataclasses.replace(
      setup, deploy_config=deploy_config,
      input=SyntheticInput(setup.input) if synthetic else setup.input,
      global_batch=optimization.global_batch_size(config),
      steps_per_epoch=optimization.steps_per_epoch(config, setup.dataset.num_samples))
  return config, setup


def _seconds_per_run(sess, fetch, settings):
  for _ in range(settings.doctor_warmup_steps):
    sess.run(fetch)
  start = time.perf_counter()
  for _ in range(settings.doctor_steps):
    sess.run(fetch)
  return (time.perf_counter() - start) / settings.doctor_steps


def _out_of_memory(component, num_clones, error):
  logging.warning('%s, %s clone(s): out of memory: %s', component, num_clones,
                  error.message.splitlines()[0])
  return Measurement(component, num_clones, None, None,
                     'out of memory (ResourceExhaustedError)')


def _measured(component, num_clones, examples, seconds):
  rate = examples / seconds
  logging.info('%s, %s clone(s): %.1f examples/sec, %.4f sec/step', component,
               num_clones if num_clones is not None else '-', rate, seconds)
  return Measurement(component, num_clones, rate, seconds)


def time_input(config, setup, settings, session_config=None):
  """The input pipeline alone: batches of setup.input pulled on the inputs device.

  The batch is not fetched into Python (a group of the batch's tensors is run), so a
  video batch is not copied out for nothing. Returns a Measurement.
  """
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(setup.deploy_config.inputs_device()):
      dataset = setup.input.dataset(setup.dataset, setup.input_settings)
      batch = tf.data.make_one_shot_iterator(dataset).get_next()
      fetch = tf.group(*tf.nest.flatten(batch))
  session_config = session_config or session_config_for(config, setup.deploy_config)
  try:
    with tf.Session(graph=graph, config=session_config) as sess:
      seconds = _seconds_per_run(sess, fetch, settings)
  except tf.errors.ResourceExhaustedError as error:
    return _out_of_memory(INPUT, None, error)
  return _measured(INPUT, None, setup.input_settings.batch_size, seconds)


def time_step(config, setup, settings, session_config=None, trace=False):
  """One training step as `build_training_graph(config, setup)` builds it.

  Args:
    config, setup: a checked TrainConfig and its TrainSetup (see `with_clones`).
    settings: DoctorSettings (steps to time and to warm up).
    session_config: the ConfigProto of the session; None = the one training would use.
    trace: also run one step with FULL_TRACE and return its run metadata.

  Returns:
    (Measurement, tf.RunMetadata or None). The component is SYNTHETIC when setup's
    input is a SyntheticInput, else FULL. Variables start from their initializers: a
    fine-tuning checkpoint would not change the speed.
  """
  num_clones = setup.deploy_config.num_clones
  component = SYNTHETIC if isinstance(setup.input, SyntheticInput) else FULL
  graph = tf.Graph()
  with graph.as_default():
    train_op = build_training_graph(config, setup).train_op
    init = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer(),
                    tf.tables_initializer())
  session_config = session_config or session_config_for(config, setup.deploy_config)
  run_metadata = tf.RunMetadata() if trace else None
  try:
    with tf.Session(graph=graph, config=session_config) as sess:
      sess.run(init)
      seconds = _seconds_per_run(sess, train_op, settings)
      if trace:
        sess.run(train_op, run_metadata=run_metadata,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
  except tf.errors.ResourceExhaustedError as error:
    return _out_of_memory(component, num_clones, error), None
  return _measured(component, num_clones, config.batch_size * num_clones, seconds), run_metadata
