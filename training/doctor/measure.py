"""The doctor's timings: each component in a graph and a session of its own, timed in
alternating rounds.

  input pipeline alone    the training input's batches pulled on the input device, nothing
                          else: examples/sec the data can be made at.
  model, synthetic data   the trainer's own graph (`build_training_graph`) with n clones, its
                          input replaced by `SyntheticInput` (one batch of zeros): forward,
                          backward, gradient sum (or all-reduce, replicated) and update,
                          without the pipeline's work.
  full training step      the trainer's graph as the flags build it; one more step is traced
                          (FULL_TRACE) for `deployment.trace.placement`. Its input-wait share is
                          the trainer's own (training.summaries.InputWait), as the
                          progress lines of the same settings show it.

Every session is opened first; then an untimed round runs `doctor_warmup_steps` steps of
every component in turn (caches, shuffle buffers, thread pools), and each timed round
runs `doctor_steps` steps of every component in turn, each after a lead-in of untimed
steps that takes what its pipeline made while the others ran (`Component.lead_in`:
LOCAL_BUFFER batches of a local pipeline, SERVICE_BUFFER from a tf.data service), so no
figure counts batches made in another component's time. A component's figure is its median
over the timed rounds, so all of them see the same machine (a shared machine's speed
moves by 15 % and more within a minute). Rates count every clone's examples:
batch_size x clones / seconds per step. A component that runs out of memory
(ResourceExhaustedError) is a measurement with an error, not a crash: it is what the
memory verdict reads (`measure`'s `tolerate` may add others); any other error raises. The
rounds are `rounds.alternate`'s, the one harness the benchmarks time with too.
"""

import contextlib
import dataclasses
import statistics
from typing import Optional, Tuple

from absl import logging

from datasets.inputs.synthetic_input import SyntheticInput
from deployment import model_deploy, replicated, xla
from deployment.session.session_config import make_session_config
from tf_compat import tf
from training import optimization
from training.doctor import rounds
from training.train import build_training_graph

__all__ = ['INPUT', 'SYNTHETIC', 'FULL', 'LOCAL_BUFFER', 'SERVICE_BUFFER', 'SERVICE_REQUESTS',
           'Measurement', 'Component', 'session_config_for', 'with_clones',
           'buffered_batches', 'own_service_job', 'input_component', 'initialize_and_sync',
           'step_component', 'error_text', 'measure']

INPUT = 'input pipeline alone'
SYNTHETIC = 'model, synthetic data'
FULL = 'full training step'
# Batches a pipeline holds ready after idling: its prefetch of 2 and the one being made.
LOCAL_BUFFER = 3
# From a tf.data service: 9 to 10 batches came at once from one data worker left idle for
# 15 s (the pipeline's prefetch, the worker's buffer, the trainer's outstanding requests).
SERVICE_BUFFER = 12
# The outstanding requests of each doctor reader of a tf.data service. TensorFlow's own
# limit grows while a reader waits: an idle input-alone reader had more than 22 batches
# made for it, on the data worker's core, while the full step starved (66 % input wait).
SERVICE_REQUESTS = 4


@dataclasses.dataclass(frozen=True)
class Measurement:
  """One component's timing.

  Attributes:
    component: INPUT, SYNTHETIC or FULL.
    num_clones: clones of the step; None for the input pipeline alone.
    examples_per_sec: the median over rounds of examples (every clone's) per second;
      None when it failed.
    seconds_per_step: seconds per step (per batch for the input) at that median.
    round_rates: examples/sec of each round, in order.
    error: why it failed ('out of memory (ResourceExhaustedError)'), or None.
    input_wait_share: of a training step, the median over rounds of the seconds its
      draws waited for input (InputWait.total's growth) over the round's seconds: what
      the progress lines call input wait. None for the input alone.
    first_step_secs: seconds of the first step, when the session was opened (graph
      optimization and placement, XLA's compilation).
  """
  component: str
  num_clones: Optional[int]
  examples_per_sec: Optional[float]
  seconds_per_step: Optional[float]
  round_rates: Tuple[float, ...] = ()
  error: Optional[str] = None
  input_wait_share: Optional[float] = None
  first_step_secs: Optional[float] = None


@dataclasses.dataclass
class Component:
  """What one measurement runs: a graph, its init ops (run in turn, each a session run of
  its own) and the fetch of one step (and, of a
  training step, the seconds its draws waited for input so far); `lead_in`, the untimed
  steps before each timed round (`buffered_batches`)."""
  name: str
  num_clones: Optional[int]
  examples_per_step: int
  graph: tf.Graph
  init: Tuple[tf.Operation, ...]
  fetch: object
  session_config: tf.ConfigProto
  session: Optional[tf.Session] = None
  input_wait: object = None
  lead_in: int = 0


def session_config_for(config, deploy_config):
  """The session config training would use for `deploy_config` (GPU options from config;
  with --xla, Grappler's remapper off as in training: deployment.xla)."""
  session_config = make_session_config(
      deploy_config, gpu_allow_growth=config.gpu_allow_growth,
      gpu_memory_fraction=config.gpu_memory_fraction)
  return xla.session_config(session_config) if config.xla else session_config


def with_clones(setup, num_clones, synthetic):
  """`setup` of one worker with `num_clones` clones (its config's too), on SyntheticInput
  if asked.

  The deployment keeps the config's clone_on_cpu, variable update and gradient
  repacking (so every count is timed as training would run it); the global batch and the
  schedule's steps follow the clone count as check_train_config would compute them.
  """
  config = dataclasses.replace(setup.config, num_clones=num_clones)
  deploy_config = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_on_cpu=config.clone_on_cpu,
      variable_update=config.variable_update,
      gradient_repacking=config.gradient_repacking)
  return dataclasses.replace(
      setup, config=config, deploy_config=deploy_config,
      input=SyntheticInput(setup.input) if synthetic else setup.input,
      global_batch=optimization.global_batch_size(config),
      steps_per_epoch=optimization.steps_per_epoch(config, setup.dataset.num_samples))


def buffered_batches(setup):
  """Batches setup.input's pipeline may hold ready after idling: 0 for SyntheticInput,
  SERVICE_BUFFER with a tf.data service, LOCAL_BUFFER otherwise."""
  if isinstance(setup.input, SyntheticInput):
    return 0
  return SERVICE_BUFFER if setup.input_settings.service else LOCAL_BUFFER


def own_service_job(setup, component):
  """`setup` whose tf.data service job (if any) is `component`'s own, read with at most
  SERVICE_REQUESTS outstanding requests. Two iterators of one job share its stream: the
  idle one keeps drawing batches into its buffer while the other is timed (it took half
  the data worker's batches), and a training of the same train_dir would lose batches to
  the doctor; an idle reader of a job of its own still has batches made for it until its
  requests are answered."""
  service = setup.input_settings.service
  if service is None:
    return setup
  service = dataclasses.replace(
      service, job_name='%s, doctor: %s' % (service.job_name, component),
      max_outstanding_requests=SERVICE_REQUESTS)
  return dataclasses.replace(setup, input_settings=dataclasses.replace(
      setup.input_settings, service=service))


def input_component(setup, session_config=None):
  """The input pipeline alone: batches of setup.input pulled on the inputs device. A group
  of the batch's tensors is run, so a video batch is not copied into Python for nothing."""
  config = setup.config
  setup = own_service_job(setup, INPUT)
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(setup.deploy_config.inputs_device()):
      dataset = setup.input.dataset(setup.dataset, setup.input_settings)
      batch = tf.data.make_one_shot_iterator(dataset).get_next()
      fetch = tf.group(*tf.nest.flatten(batch))
  return Component(INPUT, None, setup.input_settings.batch_size, graph, (), fetch,
                   session_config or session_config_for(config, setup.deploy_config),
                   lead_in=buffered_batches(setup))


def step_component(setup, session_config=None):
  """One training step as `build_training_graph(setup)` builds it: SYNTHETIC when
  setup's input is a SyntheticInput, else FULL. Variables start from their initializers
  (a fine-tuning checkpoint would not change the speed); replicated copies are then
  synced from clone 0 as the trainer's local init does (`replicated.REPLICA_SYNC`)."""
  config = setup.config
  num_clones = setup.deploy_config.num_clones
  name = SYNTHETIC if isinstance(setup.input, SyntheticInput) else FULL
  setup = own_service_job(setup, name)
  graph = tf.Graph()
  with graph.as_default():
    built = build_training_graph(setup)
    init = initialize_and_sync()
  examples = config.batch_size * num_clones * config.num_micro_batches
  return Component(name, num_clones, examples, graph, init, built.train_op,
                   session_config or session_config_for(config, setup.deploy_config),
                   input_wait=built.input_wait, lead_in=buffered_batches(setup))


def initialize_and_sync():
  """In the default graph: (the op initializing every variable and table,) then, for a
  replicated deployment, (the op copying clone 0's values to the copies): REPLICA_SYNC
  reads the initialized originals, so it runs after, in a session run of its own, as the
  trainer's local init op follows its init op. A control dependency on the init op
  would not do: it would order the sync's group, not the reads inside it."""
  init = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer(),
                  tf.tables_initializer())
  return (init,) + tuple(tf.get_collection(replicated.REPLICA_SYNC))


def _seconds_per_step(component, steps):
  """-> (seconds per step, share of them the draws waited for input, or None)."""
  waited = (component.session.run(component.input_wait)
            if component.input_wait is not None else None)
  seconds = rounds.seconds_per_call(lambda: component.session.run(component.fetch), steps)
  if waited is not None:
    waited = (component.session.run(component.input_wait) - waited) / (seconds * steps)
  return seconds, waited


def _open(component, stack):
  """Opens the component's session (closed by `stack`), initializes it and runs one step
  (the first run optimizes and places the graph; with XLA it compiles): -> its seconds."""
  component.session = stack.enter_context(
      tf.Session(graph=component.graph, config=component.session_config))
  for op in component.init:
    component.session.run(op)
  return rounds.seconds_per_call(lambda: component.session.run(component.fetch), 1)


def error_text(error):
  """What a Measurement says of a tolerated error: 'out of memory (ResourceExhaustedError)'
  (what the memory verdict reads), else 'failed: Type: its first useful line'."""
  if isinstance(error, tf.errors.ResourceExhaustedError):
    return 'out of memory (ResourceExhaustedError)'
  lines = [line.strip() for line in error.message.splitlines() if line.strip()]
  useful = [line for line in lines if 'Graph execution error' not in line]
  return 'failed: %s: %s' % (type(error).__name__, (useful or lines or [''])[0][:300])


def _result(component, rates, shares, error=None, first_step_secs=None):
  if error is not None:
    logging.warning('%s, %s clone(s): %s', component.name, component.num_clones,
                    error_text(error))
    return Measurement(component.name, component.num_clones, None, None, tuple(rates),
                       error_text(error))
  rate = statistics.median(rates)
  logging.info('%s, %s clone(s): %.1f examples/sec (rounds: %s)', component.name,
               '-' if component.num_clones is None else component.num_clones, rate,
               ', '.join('%.1f' % r for r in rates))
  return Measurement(component.name, component.num_clones, rate,
                     component.examples_per_step / rate, tuple(rates),
                     input_wait_share=statistics.median(shares) if shares else None,
                     first_step_secs=first_step_secs)


def _timer(component, settings):
  """fn(round_index) -> (examples/sec, input-wait share) of one round of `component`:
  the warm-up round's doctor_warmup_steps (None when 0), or its untimed lead-in and
  doctor_steps timed steps."""
  def one_round(round_index):
    steps = settings.doctor_steps if round_index else settings.doctor_warmup_steps
    if not steps:
      return None
    for _ in range(component.lead_in if round_index else 0):
      component.session.run(component.fetch)
    seconds, share = _seconds_per_step(component, steps)
    return component.examples_per_step / seconds, share
  return one_round


def _traced_step(component):
  run_metadata = tf.RunMetadata()
  component.session.run(component.fetch, run_metadata=run_metadata,
                        options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
  return run_metadata


def measure(components, settings, trace=(), tolerate=(tf.errors.ResourceExhaustedError,)):
  """Opens every component, times them in alternating rounds (`rounds.alternate`), and
  closes them.

  Args:
    components: `Component`s from input_component and step_component.
    settings: DoctorSettings (rounds, steps per round, warm-up steps).
    trace: indices of components to run once more with FULL_TRACE after the rounds.
    tolerate: the TensorFlow errors that make a measurement with an error instead of a
      crash (the doctor: out of memory; a benchmark may add XLA refusing a graph).

  Returns:
    ([Measurement per component, in order], {index in `trace`: tf.RunMetadata of its
    traced step}, without a component that failed).
  """
  errors, first = {}, {}
  with contextlib.ExitStack() as stack:
    for index, component in enumerate(components):
      try:
        first[index] = _open(component, stack)
      except tolerate as error:
        errors[index] = error
    found = rounds.alternate(
        {index: _timer(component, settings) for index, component in enumerate(components)
         if index not in errors}, settings.doctor_rounds, tolerate=tolerate)
    errors.update(found.failed)
    traces = {index: _traced_step(components[index]) for index in trace
              if index not in errors}
  measurements = []
  for index, component in enumerate(components):
    timed = found.samples.get(index, [])
    measurements.append(_result(component, [rate for rate, _ in timed],
                                [share for _, share in timed if share is not None],
                                errors.get(index), first.get(index)))
  return measurements, traces
