"""`run_doctor(doctor_setup(config), settings)`: why is N clones slower than 1, on this machine.

With the trainer's checked configuration (one worker), in one run: the input pipeline
alone, the model step on synthetic data for 1..N clones and the full training step,
timed in alternating rounds, the full step traced once for where the clones really ran
(`measure`); then a verdict (`verdicts`), the table printed and written with a plot
(`report`). Tests call `diagnose` with a config, and may hand it a
TrainSetup whose input they replaced and a session config of their own.
"""

import dataclasses
import os
import sys
from typing import Tuple

from absl import logging

from deployment.trace import placement
from training.doctor import measure, report, verdicts
from training.doctor.settings import check_settings
from training.setup import check_train_config

__all__ = ['Diagnosis', 'single_worker', 'doctor_setup', 'diagnose', 'run_doctor',
           'output_dir']

_ONE_WORKER = dict(worker_replicas=1, num_ps_tasks=0, task=0, sync_replicas=False,
                   replicas_to_aggregate=1, sync_trace=False, ps_hosts=(), worker_hosts=(),
                   job_name=None, task_index=0, master='')


@dataclasses.dataclass(frozen=True)
class Diagnosis:
  """What the doctor found.

  Attributes:
    run: what was measured: model_name, dataset_name, dataset_split_name, batch_size
      (per clone), num_clones, clone_on_cpu, variable_update, gradient_repacking (None
      unless replicated), cpu_cores, doctor_rounds, doctor_steps, doctor_warmup_steps.
    devices: `deployment.trace.placement.VisibleDevices` of the full step's session config.
    measurements: `measure.Measurement`s: input alone, synthetic 1..N, full step.
    placements: `deployment.trace.placement.ClonePlacement`s of the traced full step (empty when
      the full step failed).
    verdict: `verdicts.Verdict`.
  """
  run: dict
  devices: placement.VisibleDevices
  measurements: Tuple[measure.Measurement, ...]
  placements: Tuple[placement.ClonePlacement, ...]
  verdict: verdicts.Verdict


def single_worker(config):
  """`config` as one worker without a cluster: the doctor times one worker's clones, so
  a cluster flagfile works as it is (its cluster flags are set aside, and logged)."""
  changed = {name: value for name, value in _ONE_WORKER.items()
             if getattr(config, name) != value}
  if changed:
    logging.info('The doctor times one worker: cluster flags set aside (%s)',
                 ', '.join('--%s' % name for name in sorted(changed)))
  return dataclasses.replace(config, **_ONE_WORKER)


def _run_summary(config, settings):
  return dict(model_name=config.model_name, dataset_name=config.dataset_name,
              dataset_split_name=config.dataset_split_name, batch_size=config.batch_size,
              num_clones=config.num_clones, clone_on_cpu=config.clone_on_cpu,
              variable_update=config.variable_update,
              gradient_repacking=(config.gradient_repacking
                                  if config.variable_update == 'replicated' else None),
              cpu_cores=os.cpu_count(), doctor_rounds=settings.doctor_rounds,
              doctor_steps=settings.doctor_steps,
              doctor_warmup_steps=settings.doctor_warmup_steps)


def doctor_setup(config):
  """The TrainSetup the doctor measures: `config` checked as one worker (cluster flags
  set aside). Raises ConfigError for a flag that training would refuse too."""
  return check_train_config(single_worker(config))


def diagnose(setup, settings, session_config=None):
  """Measures and judges; returns a Diagnosis (nothing printed or written).

  Args:
    setup: the TrainSetup measured (`doctor_setup`); tests pass one with another input
      (a starved or a synthetic one).
    settings: DoctorSettings.
    session_config: a tf.ConfigProto for every session; None = what training would use
      for each clone count. Tests pass a wrong one to see clones share a device.
  """
  config = setup.config
  num_clones = config.num_clones
  components = [measure.input_component(setup, session_config)]
  for count in range(1, num_clones + 1):
    components.append(measure.step_component(
        measure.with_clones(setup, count, synthetic=True), session_config))
  components.append(measure.step_component(setup, session_config))
  full = len(components) - 1
  measurements, traces = measure.measure(components, settings, trace=(full,))
  run_metadata = traces.get(full)
  placements = (placement.clone_placement(run_metadata, setup.deploy_config)
                if run_metadata is not None else [])
  devices = placement.visible_devices(
      session_config or measure.session_config_for(config, setup.deploy_config))
  verdict = verdicts.decide(measurements, num_clones,
                            shared=placement.shared_devices(placements),
                            clone_on_cpu=config.clone_on_cpu,
                            num_gpus=len(devices.physical_gpus))
  return Diagnosis(_run_summary(config, settings), devices, tuple(measurements),
                   tuple(placements), verdict)


def output_dir(config, settings):
  """--doctor_dir, or <train_dir>/doctor."""
  return settings.doctor_dir or os.path.join(config.train_dir, 'doctor')


def run_doctor(setup, settings, session_config=None, stream=None):
  """Checks, diagnoses, prints the table and verdict, writes doctor.txt, doctor.json and
  doctor.png into `output_dir`; returns the Diagnosis.

  Raises:
    ConfigError: a bad flag (before anything is measured).
    OSError: the output directory cannot be written (after the table is printed).
  """
  check_settings(settings)
  stream = stream or sys.stdout
  diagnosis = diagnose(setup, settings, session_config)
  stream.write(report.format_text(diagnosis))
  stream.flush()
  directory = output_dir(setup.config, settings)
  os.makedirs(directory, exist_ok=True)
  paths = report.write(diagnosis, directory)
  stream.write('Wrote %s\n' % ', '.join(paths))
  return diagnosis
