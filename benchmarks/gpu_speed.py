"""GPU speed: examples/sec of float32 against float16 and bfloat16, XLA off and on, on 1..N
GPUs, for I3D (64x224x224 clips) and cifarnet, measured in one run.

    python -m benchmarks.gpu_speed                        # every GPU TensorFlow sees
    python -m benchmarks.gpu_speed --models=i3d --max_gpus=4 --i3d_batch_size=8

Each configuration is the trainer's own graph (`training.train.build_training_graph`, as
`python -m training.doctor` times it), with `--mixed_precision` and `--xla` set and its
input replaced by `SyntheticInput`: one batch of zeros of the real batches' shape, made
once in the graph, so the input pipeline is out of the figure. Clones go one per GPU, as
`--num_clones` puts them. The data the trainer's set-up needs (a few generated RGB
images and videos, converted by the project's converters) are made in a scratch
directory first; only their shapes matter.

Every configuration of a model is a doctor `Component` timed by the doctor's harness
(training/doctor/measure.py): all are opened first; then an untimed round of warm-up
steps runs every configuration in turn, and each timed round runs `--steps` steps of
every configuration in turn, so all see the same machine. A figure is the median over
the rounds. The table gives each configuration against float32 without XLA on the same
number of GPUs (the speed-up of precision and XLA), and against 1 GPU with the same
precision and XLA (the scaling); "first step" is the first step's seconds, XLA's
compilation included. After the rounds each configuration runs one traced
step: the "ran" column says what really ran (the executed convolution and matmul
kernels' dtype, or the XLA clusters), so a configuration that silently fell back to
float32 shows. A combination TensorFlow cannot run (no kernel for an op in that dtype on
that device) is listed as not available, with the reason; one that runs out of memory
as such.

Without a GPU it says so and runs the CPU path at small sizes (`--cpu_*` flags) as a
smoke check of every configuration: those figures are NOT GPU figures, and CPU speed-ups
are not to be expected (on this CPU bfloat16 and float16 are slower than float32).

Variants: `VARIANTS` below adds rows of other trainer flags, today gradient
accumulation (`--num_micro_batches=2`) and `--variable_update=replicated` (a copy of the
variables per GPU, the gradients all-reduced with NCCL, issue 40; the base rows are
parameter_server, slim's gradients summed on one device); each variant is measured with
every precision and XLA setting like the base rows, and a replicated row's JSON line
gives its ratio to the base row of the same GPUs, precision and XLA
(`vs_parameter_server`).

Prints the table and one JSON line per configuration. Run from the repository root.
Exit status: 0 done, 2 bad flags (one `error:` line), 3 the scratch data could not be made.
"""

import contextlib
import dataclasses
import json
import os
import platform
import statistics
import tempfile
from typing import Optional

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app, flags

from benchmarks import gpu_speed_data
from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment import precision, xla
from deployment.session.precision_options import PRECISIONS
from tf_compat import tf
from training.config import TrainConfig
from training.doctor import measure
from training.doctor.settings import DoctorSettings
from training.setup import check_train_config

# (label, TrainConfig overrides): rows measured besides the base one, each with every
# precision and XLA setting. Gradient accumulation: 2 micro-batches per update, so each
# step computes twice the examples (examples/sec counts them all). Replicated: the
# trainer's default --gradient_repacking.
VARIANTS = (('', {}), ('2 micro-batches', {'num_micro_batches': 2}),
            ('replicated', {'variable_update': 'replicated'}))


@dataclasses.dataclass(frozen=True)
class GpuSpeedSettings:
  """What the benchmark compares; `check_settings` holds its rules."""
  # What to compare.
  models: tuple[str, ...] = param(('i3d', 'cifarnet'), 'Networks: i3d and/or cifarnet.')
  precisions: tuple[str, ...] = param(PRECISIONS, 'Compute dtypes (--mixed_precision); the '
                                      'first is the baseline.')
  xla_modes: tuple[str, ...] = param(('off', 'on'), 'XLA settings, off and/or on.')
  max_gpus: int = param(0, 'Measure 1..N GPUs (0 = every GPU TensorFlow sees).')
  # Sizes on GPUs.
  i3d_frames: int = param(64, 'I3D clip frames.')
  i3d_image_size: int = param(224, 'I3D crop size.')
  i3d_batch_size: int = param(6, 'I3D clips per GPU (the published fine-tuning batch).')
  cifarnet_batch_size: int = param(128, 'cifarnet images per GPU.')
  # Sizes of the CPU smoke check (no GPU).
  cpu_i3d_frames: int = param(8, 'Without a GPU: I3D clip frames.')
  cpu_i3d_image_size: int = param(64, 'Without a GPU: I3D crop size.')
  cpu_i3d_batch_size: int = param(2, 'Without a GPU: I3D clips per step.')
  cpu_cifarnet_batch_size: int = param(16, 'Without a GPU: cifarnet images per step.')
  cpu_steps: int = param(3, 'Without a GPU: timed steps per configuration and round.')
  cpu_rounds: int = param(2, 'Without a GPU: alternating rounds.')
  # Timing.
  warmup_steps: int = param(5, 'Untimed steps of each configuration (after compilation; '
                            'without a GPU: 1).')
  steps: int = param(20, 'Timed steps of each configuration per round.')
  rounds: int = param(3, 'Alternating rounds; medians are reported.')
  work_dir: Optional[str] = param(None, 'Scratch directory for the generated data '
                                  '(default: a temporary directory, removed at the end).')
  random_seed: Optional[int] = param(
      None, 'Passed to every training run as --random_seed (its weights and batches then '
      'repeat run to run); unset: unseeded, as the trainer.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).
MODELS = ('i3d', 'cifarnet')


def check_settings(settings):
  """Returns settings, or raises ConfigError naming the flag."""
  for name, values, valid in (('models', settings.models, MODELS),
                              ('precisions', settings.precisions, PRECISIONS),
                              ('xla_modes', settings.xla_modes, ('off', 'on'))):
    errors.require(values and set(values) <= set(valid), '--%s=%s: give one or more of %s'
                   % (name, ','.join(values), ', '.join(valid)))
  for name in ('i3d_frames', 'i3d_image_size', 'i3d_batch_size', 'cifarnet_batch_size',
               'cpu_i3d_frames', 'cpu_i3d_image_size', 'cpu_i3d_batch_size',
               'cpu_cifarnet_batch_size', 'steps', 'rounds', 'cpu_steps', 'cpu_rounds'):
    errors.require(getattr(settings, name) >= 1, '--%s=%d must be >= 1'
                   % (name, getattr(settings, name)))
  errors.require(settings.max_gpus >= 0 and settings.warmup_steps >= 0,
                 '--max_gpus and --warmup_steps must be >= 0')
  return settings


@dataclasses.dataclass
class Row:
  """One configuration: its flags, its component (None when not available), results."""
  model: str
  variant: str
  gpus: int
  mixed_precision: str
  xla: bool
  config: Optional[TrainConfig] = None
  component: Optional[measure.Component] = None
  rates: list = dataclasses.field(default_factory=list)
  error: Optional[str] = None
  ran: str = ''
  first_step_secs: Optional[float] = None

  @property
  def examples_per_sec(self):
    return statistics.median(self.rates) if self.rates and not self.error else None


def _train_config(settings, model, data_dirs, on_gpu, train_dir):
  """The trainer's config of `model` at the benchmark's sizes (GPU or CPU smoke)."""
  prefix = '' if on_gpu else 'cpu_'
  values = dict(model_name=model, train_dir=train_dir, optimizer='momentum',
                learning_rate=0.01, learning_rate_decay_type='fixed', clone_on_cpu=not on_gpu,
                num_readers=1, num_preprocessing_threads=1, random_seed=settings.random_seed)
  if model == 'i3d':
    values.update(dataset_name='video_folder', dataset_dir=data_dirs['video'],
                  clip_frames=getattr(settings, prefix + 'i3d_frames'),
                  train_image_size=getattr(settings, prefix + 'i3d_image_size'),
                  batch_size=getattr(settings, prefix + 'i3d_batch_size'))
  else:
    values.update(dataset_name='image_folder', dataset_dir=data_dirs['image'],
                  batch_size=getattr(settings, prefix + 'cifarnet_batch_size'))
  return TrainConfig(**values)


def _rows(settings, base, model, gpu_counts):
  """Every configuration of `model`, built (or marked not available)."""
  rows = []
  for label, overrides in VARIANTS:
    for gpus in gpu_counts:
      for mixed_precision in settings.precisions:
        for mode in settings.xla_modes:
          row = Row(model, label, gpus, mixed_precision, mode == 'on')
          row.config = dataclasses.replace(base, num_clones=gpus,
                                           mixed_precision=mixed_precision,
                                           xla=row.xla, **overrides)
          _build(row)
          rows.append(row)
  return rows


def _build(row):
  try:
    setup = check_train_config(row.config)
  except errors.ConfigError as error:
    row.error = 'not available: %s' % error
    return
  row.component = measure.step_component(
      measure.with_clones(setup, row.gpus, synthetic=True))


def _what_ran(run_metadata):
  """'bfloat16 (57 kernels)', 'XLA (4 clusters)' or 'float32 (60 kernels)' from one
  traced step's run_metadata."""
  clusters = xla.xla_clusters(run_metadata)
  parts = ['%s (%d kernels)' % item for item in
           sorted(precision.compute_dtypes(run_metadata).items())]
  if clusters:
    parts.append('XLA (%d clusters)' % clusters.get('_XlaRun', clusters.get('XlaLaunch', 0)))
  return ', '.join(parts) or 'nothing traced'


def _time(rows, settings):
  """Times every available row in the doctor's alternating rounds (measure.measure), each
  traced once more after them; a TensorFlow error (out of memory, XLA refusing to compile
  a combination) makes the row's error, its first line kept."""
  live = [row for row in rows if row.component is not None]
  found, traces = measure.measure(
      [row.component for row in live],
      DoctorSettings(doctor_rounds=settings.rounds, doctor_steps=settings.steps,
                     doctor_warmup_steps=settings.warmup_steps),
      trace=range(len(live)), tolerate=(tf.errors.OpError,))
  for index, (row, measured) in enumerate(zip(live, found)):
    row.rates, row.error = list(measured.round_rates), measured.error
    row.first_step_secs = measured.first_step_secs
    if index in traces:
      row.ran = _what_ran(traces[index])


def _ratio(value, baseline):
  return round(value / baseline, 3) if value and baseline else None


def _report(rows, on_gpu, model_line):
  """Prints the table, then one JSON line per row."""
  print(model_line)
  print('| %s | variant | precision | XLA | examples/sec | vs float32 without XLA | vs 1 '
        '%s | ran | first step (s) |' % (('GPUs', 'GPU') if on_gpu else ('clones (CPU)',
                                                                        'clone')))
  print('|---|---|---|---|---|---|---|---|---|')
  index = {(r.variant, r.gpus, r.mixed_precision, r.xla): r for r in rows}
  lines = []
  reasons = []
  for row in rows:
    fields = _fields(row, index, rows[0].mixed_precision, on_gpu)
    rate = fields['examples_per_sec']
    if row.error and row.error not in reasons:
      reasons.append(row.error)
    print('| %d | %s | %s | %s | %s | %s | %s | %s | %s |' % (
        row.gpus, row.variant or '-', row.mixed_precision, 'on' if row.xla else 'off',
        rate if rate else '(%d)' % (reasons.index(row.error) + 1),
        fields['vs_float32_no_xla'] or '-', fields['vs_one'] or '-', row.ran or '-',
        fields['first_step_secs'] or '-'))
    lines.append(json.dumps(fields))
  for number, reason in enumerate(reasons, 1):
    print('(%d) %s' % (number, reason))
  print('\n'.join(lines))


def _fields(row, index, baseline_precision, on_gpu):
  """The row's figures, its ratios to float32 without XLA and to 1 GPU (same run); a
  replicated row's to parameter_server too."""
  base = index.get((row.variant, row.gpus, baseline_precision, False))
  one = index.get((row.variant, 1, row.mixed_precision, row.xla))
  server = index.get(('', row.gpus, row.mixed_precision, row.xla))
  rate = row.examples_per_sec
  extra = ({'vs_parameter_server': _ratio(rate, server and server.examples_per_sec)}
           if row.variant == 'replicated' else {})
  return dict(model=row.model, variant=row.variant, gpus=row.gpus, on_gpu=on_gpu,
              mixed_precision=row.mixed_precision, xla=row.xla,
              examples_per_sec=round(rate, 2) if rate else None,
              rounds=[round(r, 2) for r in row.rates],
              vs_float32_no_xla=_ratio(rate, base and base.examples_per_sec),
              vs_one=_ratio(rate, one and one.examples_per_sec), ran=row.ran,
              first_step_secs=(round(row.first_step_secs, 1)
                               if row.first_step_secs and not row.error else None),
              error=row.error, **extra)


def _model_line(settings, model, base, gpu_counts, on_gpu):
  size = ('%dx%dx%d clips' % (base.clip_frames, base.train_image_size, base.train_image_size)
          if model == 'i3d' else '32x32 images')
  return ('\n%s, %s, batch %d per %s, %s %s; synthetic in-graph input; %d round(s) of %d '
          'steps after %d warm-up; medians' % (
              model, size, base.batch_size, 'GPU' if on_gpu else 'clone',
              'GPUs' if on_gpu else 'logical CPU clones',
              ','.join(str(n) for n in gpu_counts), settings.rounds, settings.steps,
              settings.warmup_steps))


def run(settings, work_dir):
  """Measures every model's configurations; prints their tables. Returns the rows."""
  gpus = len(tf.config.list_physical_devices('GPU'))
  on_gpu = gpus > 0
  if on_gpu:
    gpu_counts = list(range(1, (min(settings.max_gpus, gpus) if settings.max_gpus
                                else gpus) + 1))
  else:
    gpu_counts = [1]
    settings = dataclasses.replace(settings, steps=settings.cpu_steps,
                                   rounds=settings.cpu_rounds,
                                   warmup_steps=min(settings.warmup_steps, 1))
    print('No GPU visible to TensorFlow: this is the CPU smoke check at small sizes. The '
          'GPU figures are NOT measured here, and these CPU ratios are not speed-ups to '
          'expect on a GPU (on a CPU, half precision is usually slower).')
  data_dirs = gpu_speed_data.make_data(work_dir, settings.models)
  all_rows = []
  for model in settings.models:
    base = _train_config(settings, model, data_dirs, on_gpu,
                         os.path.join(work_dir, 'train_' + model))
    rows = _rows(settings, base, model, gpu_counts)
    _time(rows, settings)
    _report(rows, on_gpu, _model_line(settings, model, base, gpu_counts, on_gpu))
    all_rows.extend(rows)
  print('machine: %s, %d cores, %s, Python %s, TensorFlow %s' % (
      platform.machine(), os.cpu_count(),
      '%d GPU(s)' % gpus if on_gpu else 'no GPU', platform.python_version(),
      tf.__version__))
  return all_rows


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(GpuSpeedSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  with contextlib.ExitStack() as stack:
    work_dir = settings.work_dir or stack.enter_context(
        tempfile.TemporaryDirectory(prefix='gpu_speed_'))
    try:
      run(settings, work_dir)
    except errors.DataError as error:
      return errors.report(error)
  return errors.OK


if __name__ == '__main__':
  define_flags(GpuSpeedSettings)
  app.run(main, flags_parser=parse_flags)
