"""Input-bound training with local input against the same training fed by a tf.data service.

    python -m benchmarks.data_service                 # about 5 minutes on 2 cores
    python -m benchmarks.data_service --rounds=1 --steps=2 --clip_frames=4   # a smoke run

This process is the trainer, pinned to --trainer_core; one data worker and its dispatcher
(`python -m datasets.data_service`) run pinned to --worker_core. The training is a narrow
I3D (depth 0.125) on 64-frame clips cropped to 40 x 40 from 256 x 341 JPEG frames: the
decode of a batch costs about what the model's step does, so on one core local input
about halves the step rate, and the service can give it back. Both trainings are timed by
the doctor's harness (training/doctor/measure.py) in one run: the input pipeline alone,
the model on synthetic data and the full training step with local input, and the input
alone and the full step read from the service, every one in turn in each round, after one
discarded warm-up round; each round's service/local ratio of the full step's steps/s, and
their median, is the figure (target >= 1.6x). The doctor's rules (verdicts.decide) judge
each configuration on these measurements, so both input verdicts come from the same run.
The data worker's input alone is the per-core figure of the cores-per-GPU arithmetic; it
can run high in late rounds (the worker makes batches for the idle input-alone job while
the others are timed; docs/benchmarks.md), so the local pipeline alone is printed beside.

Data: `make_synthetic_videos` (240 x 320) converted by `convert_videos` at short side 256,
the frames the GPU arithmetic of docs/data_service.md counts. Prints one JSON line per
measurement, per ratio, per verdict, the arithmetic and a machine line. Run from the
repository root. TensorFlow is imported inside functions: the converter's processes are
spawned and import this module again. Exit status: 0 done, 2 bad flags (one `error:` line).
"""

import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

import portpicker
from absl import app, flags

from core import errors
from core.params import (ConfigError, config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from training.doctor.rounds import median_ratio

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One H200, I3D at batch 8 of 64 x 224 x 224 clips (issue 23, measured 2026-11-26).
H200_CLIPS_PER_SEC = {'tf32': 120.0, 'float16': 144.0}
GPU_CLIP_FRAMES = 64
TARGET = 1.6


@dataclasses.dataclass(frozen=True)
class DataServiceBenchSettings:
  """What `python -m benchmarks.data_service` measures; `check_settings` holds the rules."""
  # Measurement.
  rounds: int = param(5, 'Timed rounds after the discarded warm-up round; medians reported.')
  steps: int = param(10, 'Timed steps of each component per round.')
  warmup_steps: int = param(3, 'Steps of each component in the warm-up round.')
  trainer_core: int = param(0, 'The core this process (the trainer) is pinned to.')
  worker_core: int = param(1, 'The core the data worker and the dispatcher are pinned to.')
  # Training.
  depth_multiplier: float = param(0.125, 'I3D width.')
  clip_frames: int = param(64, 'Frames per clip.')
  train_image_size: int = param(40, 'Crop size of the clips.')
  batch_size: int = param(8, 'Clips per step.')
  num_preprocessing_threads: int = param(1, 'Parallel clips of the pipeline (one core '
                                         'each side).')
  # Synthetic videos.
  videos_per_class: int = param(4, 'Synthetic videos per class, 2 classes (3/4 train).')
  min_frames: int = param(64, 'Shortest synthetic video.')
  max_frames: int = param(80, 'Longest synthetic video.')
  video_size: str = param('240x320', 'HEIGHTxWIDTH of the synthetic videos.')
  short_side: int = param(256, 'Short side of the converted frames.')
  work_dir: Optional[str] = param(None, 'New or empty directory for data and logs, kept '
                                  '(default: a temporary directory, removed at the end).')
  random_seed: Optional[int] = param(
      None, 'Passed to every training run as --random_seed (its weights and batches then '
      'repeat run to run); unset: unseeded, as the trainer.')


def check_settings(settings):
  """Returns `settings` if the benchmark can run with them; ConfigError names the flag."""
  allowed = sorted(os.sched_getaffinity(0))
  for flag in ('trainer_core', 'worker_core'):
    if getattr(settings, flag) not in allowed:
      raise ConfigError('--%s=%d is not a core this process may run on (%s)'
                        % (flag, getattr(settings, flag), allowed))
  if settings.trainer_core == settings.worker_core:
    raise ConfigError('--worker_core=%d must differ from --trainer_core'
                      % settings.worker_core)
  for flag in ('rounds', 'steps'):
    if getattr(settings, flag) < 1:
      raise ConfigError('--%s=%d must be >= 1' % (flag, getattr(settings, flag)))
  try:
    height, width = (int(side) for side in settings.video_size.lower().split('x'))
  except ValueError:
    raise ConfigError('--video_size=%s is not accepted: use HEIGHTxWIDTH, e.g. 240x320'
                      % settings.video_size) from None
  return dataclasses.replace(settings, video_size='%dx%d' % (height, width))


def make_records(settings, work_dir):
  """Synthetic videos converted to clip records; -> the records' directory."""
  # pylint: disable=import-outside-toplevel
  from datasets.conversion.convert_videos import VideoConversion, convert_videos
  from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
  start = time.perf_counter()
  made = make_synthetic_videos(
      os.path.join(work_dir, 'source'), num_classes=2,
      videos_per_class=settings.videos_per_class, min_frames=settings.min_frames,
      max_frames=settings.max_frames,
      sizes=(tuple(int(s) for s in settings.video_size.split('x')),), seed=0)
  records = os.path.join(work_dir, 'records')
  convert_videos(VideoConversion(
      dataset_name='video_folder', output_dir=records, video_dir=made['video_dir'],
      splits_dir=made['split_dir'], modality='rgb', short_side=settings.short_side,
      num_processes=len(os.sched_getaffinity(0)), num_shards=2, progress=False))
  print('# %d videos made and converted in %.1f s' % (
      len(made['videos']), time.perf_counter() - start), flush=True)
  return records


class PinnedService:
  """A dispatcher and one data worker, `python -m datasets.data_service` each, pinned to
  `core`, logging into `directory`; a context manager that starts them (`wait` until they
  serve) and ends them (SIGTERM, then SIGKILL after 30 s)."""

  def __init__(self, directory, core):
    self.directory, self.core = directory, core
    self.processes = []
    self.address = None

  def _start(self, name, *flags_):
    log = os.path.join(self.directory, name + '.log')
    with open(log, 'w') as handle:
      process = subprocess.Popen(
          [sys.executable, '-m', 'datasets.data_service'] + list(flags_), cwd=_ROOT,
          stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
          preexec_fn=lambda: os.sched_setaffinity(0, {self.core}))
    self.processes.append((process, log))

  @staticmethod
  def _wait_ready(process, log, timeout=180):
    """Until `process` logs its 'ready on port N' line (RuntimeError if it ends first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      with open(log) as handle:
        if 'ready on port' in handle.read():
          return
      if process.poll() is not None:
        break
      time.sleep(0.2)
    raise RuntimeError('the tf.data service did not start; see %s' % log)

  def __enter__(self):
    os.makedirs(self.directory, exist_ok=True)
    port = portpicker.pick_unused_port()
    self._start('dispatcher', '--role=dispatcher', '--port=%d' % port,
                '--work_dir=' + os.path.join(self.directory, 'journal'))
    self.address = 'localhost:%d' % port
    # Started together (a worker retries until the dispatcher answers): each process
    # spends seconds importing TensorFlow.
    try:
      self._start('data_worker', '--role=worker', '--dispatcher_address=' + self.address)
    except BaseException:
      self.__exit__()  # No `with` body runs, so nothing else would end the dispatcher.
      raise
    return self

  def wait(self):
    """Until both log their ready line and the dispatcher lists the data worker."""
    from datasets.inputs.service_client import DataWorkers  # pylint: disable=import-outside-toplevel
    for process, log in self.processes:
      self._wait_ready(process, log)
    workers, deadline = DataWorkers(self.address), time.monotonic() + 60
    while not workers.list() and time.monotonic() < deadline:
      time.sleep(0.2)

  def __exit__(self, *exc_info):
    for process, _ in self.processes:
      process.send_signal(signal.SIGTERM)
    for process, _ in self.processes:
      try:
        process.wait(30)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def pin_this_process(core):
  """Pins every thread of this process to `core` (a thread made later inherits it);
  returns the threads' count."""
  threads = os.listdir('/proc/self/task')
  for thread in threads:
    try:
      os.sched_setaffinity(int(thread), {core})
    except ProcessLookupError:  # The thread ended meanwhile.
      pass
  return len(threads)


def unpinned_threads(core):
  """Threads of this process allowed on another core than `core` (0 when pinned)."""
  count = 0
  for thread in os.listdir('/proc/self/task'):
    try:
      count += os.sched_getaffinity(int(thread)) != {core}
    except ProcessLookupError:  # The thread ended meanwhile.
      pass
  return count


def train_config(settings, records, train_dir, service_address=''):
  """The trainer's flags of both runs (they differ in --data_service_address only)."""
  from training.config import TrainConfig  # pylint: disable=import-outside-toplevel
  return TrainConfig(
      dataset_name='video_folder', dataset_dir=records, train_dir=train_dir,
      model_name='i3d', depth_multiplier=settings.depth_multiplier,
      clip_frames=settings.clip_frames, train_image_size=settings.train_image_size,
      batch_size=settings.batch_size, num_clones=1, clone_on_cpu=True,
      num_preprocessing_threads=settings.num_preprocessing_threads,
      data_service_address=service_address, random_seed=settings.random_seed)


def measure_both(settings, local, served):
  """The doctor's components of both configs, timed in the same alternating rounds.

  Returns {'local': [input, synthetic, full], 'service': [input, synthetic, full]}
  (Measurements; the synthetic step is the same model, measured once).
  """
  # pylint: disable=import-outside-toplevel
  from training.doctor import measure
  from training.doctor.settings import DoctorSettings
  from training.setup import check_train_config
  setups = [check_train_config(config) for config in (local, served)]
  components = [measure.input_component(setups[0]),
                measure.step_component(measure.with_clones(setups[0], 1, True)),
                measure.step_component(setups[0]),
                measure.input_component(setups[1]),
                measure.step_component(setups[1])]
  doctor = DoctorSettings(doctor_rounds=settings.rounds, doctor_steps=settings.steps,
                          doctor_warmup_steps=settings.warmup_steps)
  found, _ = measure.measure(components, doctor)
  return {'local': found[:3], 'service': [found[3], found[1], found[4]]}


def report(settings, found):
  """Prints the measurement, ratio, verdict and arithmetic lines."""
  from training.doctor import verdicts  # pylint: disable=import-outside-toplevel
  batch, frames = settings.batch_size, settings.clip_frames
  cores = {'local': settings.trainer_core, 'service': settings.worker_core}
  for where, rows in found.items():
    for row in rows if where == 'local' else (rows[0], rows[2]):
      line = {'measurement': row.component, 'input': where,
              'steps_per_sec': round(row.examples_per_sec / batch, 3),
              'clips_per_sec': round(row.examples_per_sec, 2),
              'rounds_steps_per_sec': [round(r / batch, 3) for r in row.round_rates]}
      if row.input_wait_share is not None:
        line['input_wait_share'] = round(row.input_wait_share, 3)
      if row.component == 'input pipeline alone':
        line.update(decoded_on_core=cores[where],
                    frames_per_sec=round(row.examples_per_sec * frames, 1))
      print(json.dumps(line))
  full = {where: rows[2].round_rates for where, rows in found.items()}
  median, per_round = median_ratio(full['service'], full['local'])
  print(json.dumps({'ratio': 'full step steps/s: service / local', 'median': median,
                    'ratios': per_round, 'target': TARGET, 'met': median >= TARGET}))
  median, per_round = median_ratio(found['service'][0].round_rates, found['local'][0].round_rates)
  print(json.dumps({'ratio': 'input alone: data worker / local pipeline', 'median': median,
                    'ratios': per_round, 'note': 'context: the same decode on another core'}))
  for where, rows in found.items():
    verdict = verdicts.decide(rows, 1)
    print(json.dumps({'doctor': where, 'verdict': verdict.name, 'reason': verdict.reason,
                      'flags': list(verdict.flags)}))
  print(json.dumps(gpu_arithmetic(found['service'][0].examples_per_sec * frames)))


def gpu_arithmetic(frames_per_sec):
  """Data-worker cores one H200 and an 8-GPU box need, from one core's decoded frames/s."""
  per_core = frames_per_sec / GPU_CLIP_FRAMES
  line = {'data_worker_clips_per_sec_per_core': round(per_core, 2),
          'clip': '%d frames' % GPU_CLIP_FRAMES}
  for precision, rate in H200_CLIPS_PER_SEC.items():
    line['cores_per_h200_%s' % precision] = round(rate / per_core, 1)
    line['cores_per_8_h200_%s' % precision] = round(8 * rate / per_core, 1)
  return line


def machine_line(load_before):
  """nproc, the CPU model, versions and the load average before and after."""
  from tf_compat import tf  # pylint: disable=import-outside-toplevel
  model = 'unknown'
  with open('/proc/cpuinfo') as handle:
    model = next((line.split(':', 1)[1].strip() for line in handle
                  if line.startswith('model name')), model)
  return ('machine: %s, %d cores (%s), Python %s, TensorFlow %s; load average %.2f '
          'before, %.2f after' % (platform.machine(), os.cpu_count(), model,
                                  platform.python_version(), tf.__version__, load_before,
                                  os.getloadavg()[0]))


def run(settings, work_dir):
  """Data, the service on worker_core, this process on trainer_core, the rounds, the
  report."""
  load_before = os.getloadavg()[0]
  with PinnedService(os.path.join(work_dir, 'service'), settings.worker_core) as service:
    records = make_records(settings, work_dir)  # While the servers start; not measured.
    service.wait()
    pin_this_process(settings.trainer_core)
    local = train_config(settings, records, os.path.join(work_dir, 'train_local'))
    served = train_config(settings, records, os.path.join(work_dir, 'train_service'),
                          service.address)
    found = measure_both(settings, local, served)
    stray = unpinned_threads(settings.trainer_core)
  report(settings, found)
  print(machine_line(load_before) + '; trainer on core %d (threads elsewhere: %d), data '
        'worker and dispatcher on core %d' % (settings.trainer_core, stray,
                                              settings.worker_core))


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(DataServiceBenchSettings, flags.FLAGS))
  except ConfigError as error:
    return errors.report(error)
  work_dir = settings.work_dir or tempfile.mkdtemp(prefix='data_service_bench_')
  try:
    run(settings, work_dir)
  finally:
    if not settings.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)
  return errors.OK


define_flags(DataServiceBenchSettings)

if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
