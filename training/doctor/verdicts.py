"""From the doctor's measurements to one verdict and the flags to change.

The rules, first match wins (N = the clone count the flags ask for):
  memory          a measurement ran out of memory (ResourceExhaustedError).
  clone overhead  clones ran on one device (the traced step says so, whatever the flags);
  input-bound     the input pipeline alone gives less than INPUT_SHARE (0.8) of the model
                  step's examples/sec on synthetic data at N clones, and the full step is
                  at most FULL_OVER_INPUT (1.25) x the input's rate: data arrive slower
                  than the model takes them, and training runs at the data's pace; or the
                  full step waited for input more than INPUT_WAIT (0.5) of its time (the
                  trainer's own measure, its progress lines' input wait), or it ran
                  below FULL_SHARE (0.67) x the synthetic step in more than half the
                  rounds (each round's pair, timed back to back): the pipeline keeps up
                  alone but not beside the model, which shares its cores (on one core the
                  draws find a batch ready and the input wait stays low, yet every step
                  pays for the decoding);
  clone overhead  N > 1 clones on synthetic data give less than CLONES_GAIN (1.2) x one
                  clone's examples/sec: more clones, no more work done;
  compute-bound   otherwise: the model step is the limit, the input keeps up.
The margins are wide on purpose: timings on a shared machine move by 15 % from run to
run, and a verdict must not flip with them.
"""

import dataclasses
import statistics
from typing import Tuple

from deployment.trace.placement import short_device
from training.doctor.measure import FULL, INPUT, SYNTHETIC

__all__ = ['INPUT_BOUND', 'COMPUTE_BOUND', 'CLONE_OVERHEAD', 'MEMORY', 'VERDICTS',
           'INPUT_SHARE', 'FULL_OVER_INPUT', 'INPUT_WAIT', 'FULL_SHARE', 'CLONES_GAIN',
           'Verdict', 'decide']

INPUT_BOUND = 'input-bound'
COMPUTE_BOUND = 'compute-bound'
CLONE_OVERHEAD = 'clone overhead'
MEMORY = 'memory'
VERDICTS = (INPUT_BOUND, COMPUTE_BOUND, CLONE_OVERHEAD, MEMORY)

INPUT_SHARE = 0.8
FULL_OVER_INPUT = 1.25
INPUT_WAIT = 0.5
FULL_SHARE = 0.67
CLONES_GAIN = 1.2


@dataclasses.dataclass(frozen=True)
class Verdict:
  """name: one of VERDICTS; reason: the figures behind it; flags: the flags to change;
  advice: what to do with them."""
  name: str
  reason: str
  flags: Tuple[str, ...]
  advice: str


def _rates(measurements):
  """(input rate, {clones: synthetic rate}, full rate); failed measurements left out."""
  done = [m for m in measurements if m.examples_per_sec is not None]
  input_rate = next((m.examples_per_sec for m in done if m.component == INPUT), None)
  synthetic = {m.num_clones: m.examples_per_sec for m in done if m.component == SYNTHETIC}
  full = next((m.examples_per_sec for m in done if m.component == FULL), None)
  return input_rate, synthetic, full


def _full_wait(measurements):
  """The full step's input-wait share (the progress lines' figure), or None."""
  return next((m.input_wait_share for m in measurements
               if m.component == FULL and m.examples_per_sec is not None), None)


def _waited(full_wait):
  if full_wait is None:
    return ''
  return ('; the full step waited for input %.0f%% of its time (the progress lines\' '
          'input wait)' % (100 * full_wait))


def _memory(measurements):
  failed = ['%s with %s clone(s)' % (m.component, m.num_clones) for m in measurements
            if m.error]
  if not failed:
    return None
  return Verdict(
      MEMORY, 'out of memory (ResourceExhaustedError): %s' % '; '.join(failed),
      ('--batch_size', '--num_clones', '--gpu_allow_growth', '--gpu_memory_fraction'),
      'Lower --batch_size (it is per clone) or --num_clones until every count fits; for '
      'video nets --clip_frames and --train_image_size shrink the activations too. Keep '
      '--gpu_allow_growth on and --gpu_memory_fraction at 0 unless another process shares '
      'the GPU.')


def _shared(shared, num_clones, clone_on_cpu, num_gpus):
  if not shared:
    return None
  where = '; '.join('clones %s on %s' % (', '.join(str(i) for i in clones),
                                          short_device(device))
                    for device, clones in shared.items())
  if clone_on_cpu:
    flags, fix = ('--num_clones',), ('the session has fewer logical CPU devices than '
                                     'clones: create it with one CPU device per clone '
                                     '(deployment.session.session_config.make_session_config)')
  else:
    flags = ('--num_clones', '--clone_on_cpu')
    fix = ('%d GPU(s) visible for %d clones: use --num_clones=%d, or --clone_on_cpu for '
           'one logical CPU device per clone' % (num_gpus, num_clones, max(num_gpus, 1)))
  return Verdict(CLONE_OVERHEAD, 'clones share a device in the traced step (%s): that '
                 'device does every sharing clone\'s work, so they add no compute' % where,
                 flags,
                 'Give each clone its own device: %s. The devices TensorFlow sees are '
                 'listed above.' % fix)


def _slow_pipeline(input_rate, model_rate, full_rate):
  """The rates say it: the pipeline alone is slower than the model, training follows it."""
  if input_rate is None or model_rate is None or input_rate >= INPUT_SHARE * model_rate:
    return False
  return full_rate is None or full_rate <= FULL_OVER_INPUT * input_rate


def _input_bound(input_rate, model_rate, full_rate, num_clones, full_wait, slowed):
  if not _slow_pipeline(input_rate, model_rate, full_rate):
    return _starved_beside_the_model(input_rate, model_rate, full_wait, slowed)
  return Verdict(
      INPUT_BOUND, 'the input pipeline alone gives %.1f examples/sec, %.2fx the model step '
      'on synthetic data with %d clone(s) (%.1f); the full step runs at %s%s' % (
          input_rate, input_rate / model_rate, num_clones, model_rate,
          'n/a' if full_rate is None else '%.1f' % full_rate, _waited(full_wait)),
      ('--num_preprocessing_threads', '--num_readers'),
      'Raise --num_preprocessing_threads (examples decoded and preprocessed in parallel; '
      'up to the cores the model leaves free) and --num_readers (shard files read at '
      'once; at most the number of shards). If the CPU is already busy, make the data '
      'cheaper to decode (smaller frames or images at conversion).')


def _slowed_rounds(measurements, num_clones):
  """(rounds in which the full step ran below FULL_SHARE x the synthetic step at
  `num_clones`, rounds compared, median of the per-round ratios or None)."""
  done = [m for m in measurements if m.examples_per_sec is not None]
  full = next((m for m in done if m.component == FULL), None)
  model = next((m for m in done if m.component == SYNTHETIC and m.num_clones == num_clones),
               None)
  if full is None or model is None:
    return 0, 0, None
  shares = [f / s for f, s in zip(full.round_rates, model.round_rates)]
  return (sum(share < FULL_SHARE for share in shares), len(shares),
          statistics.median(shares) if shares else None)


def _starved_beside_the_model(input_rate, model_rate, full_wait, slowed):
  below, rounds, share = slowed
  waited = full_wait is not None and full_wait > INPUT_WAIT
  if not waited and not 2 * below > rounds:
    return None
  alone = ('%.2fx' % (input_rate / model_rate)) if input_rate and model_rate else 'n/a'
  if waited:
    how = ('the full step waited for input %.0f%% of its time (the progress lines\' input '
           'wait)' % (100 * full_wait))
  else:
    how = ('the full step ran below %.2fx the model step on synthetic data in %d of %d '
           'rounds (median %.2fx)%s' % (FULL_SHARE, below, rounds, share, _waited(full_wait)))
  return Verdict(
      INPUT_BOUND, '%s, though the input pipeline alone makes %s the model step\'s rate: it '
      'keeps up alone, not beside the model, which takes the cores it decodes on' % (
          how, alone),
      ('--num_preprocessing_threads', '--train_image_size', '--clip_frames'),
      'Make the data cheaper to decode (smaller frames or images at conversion, fewer '
      '--clip_frames); raise --num_preprocessing_threads only if cores are left idle.')


def _clone_overhead(synthetic, num_clones, clone_on_cpu):
  if num_clones < 2 or 1 not in synthetic or num_clones not in synthetic:
    return None
  gain = synthetic[num_clones] / synthetic[1]
  if gain >= CLONES_GAIN:
    return None
  # The fewest clones within CLONES_GAIN of the fastest count: more buy nothing sure.
  fastest = max(synthetic.values())
  best = min(n for n, rate in synthetic.items() if rate * CLONES_GAIN >= fastest)
  note = (' Logical CPU devices share this machine\'s cores: CPU clones only help when '
          'one clone leaves cores idle.' if clone_on_cpu else '')
  return Verdict(
      CLONE_OVERHEAD, '%d clones give %.2fx one clone\'s examples/sec on synthetic data '
      '(%.1f -> %.1f): splitting the batch, combining gradients and running the towers cost '
      'what the extra devices bring' % (num_clones, gain, synthetic[1],
                                        synthetic[num_clones]),
      ('--num_clones',), 'Use --num_clones=%d: no count measured gives %.1fx its '
      'examples/sec.%s' % (best, CLONES_GAIN, note))


def _compute_bound(input_rate, synthetic, num_clones, full_wait):
  model_rate = synthetic.get(num_clones)
  share = ('%.2fx' % (input_rate / model_rate) if input_rate and model_rate else 'n/a')
  return Verdict(
      COMPUTE_BOUND, 'the model step is the limit: %s examples/sec on synthetic data with '
      '%d clone(s); the input pipeline alone keeps up (%s that)%s' % (
          'n/a' if model_rate is None else '%.1f' % model_rate, num_clones, share,
          _waited(full_wait)),
      ('--num_clones', '--train_image_size', '--clip_frames'),
      'More devices (--num_clones, one per GPU) or less work per example '
      '(--train_image_size, --clip_frames for video nets, --depth_multiplier for i3d). '
      'The input has headroom: on a CPU-only machine fewer --num_preprocessing_threads '
      'leave cores to the model.')


def decide(measurements, num_clones, shared=None, clone_on_cpu=False, num_gpus=0):
  """The verdict of the module docstring's rules.

  Args:
    measurements: the doctor's Measurements (input alone, synthetic 1..N, full).
    num_clones: N, the clone count the flags ask for.
    shared: {device: (clone indices,)} from `deployment.trace.placement.shared_devices`.
    clone_on_cpu: the flag, for the advice.
    num_gpus: physical GPUs TensorFlow sees, for the advice.

  Returns:
    A Verdict.
  """
  input_rate, synthetic, full_rate = _rates(measurements)
  full_wait = _full_wait(measurements)
  return (_memory(measurements)
          or _shared(shared, num_clones, clone_on_cpu, num_gpus)
          or _input_bound(input_rate, synthetic.get(num_clones), full_rate, num_clones,
                          full_wait, _slowed_rounds(measurements, num_clones))
          or _clone_overhead(synthetic, num_clones, clone_on_cpu)
          or _compute_bound(input_rate, synthetic, num_clones, full_wait))
