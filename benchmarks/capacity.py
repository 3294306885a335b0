"""What one worker moves per step, measured on loopback, and the ps tasks N workers need.

    python -m benchmarks.capacity                     # lenet, cifarnet, i3d
    python -m benchmarks.capacity --models=cifarnet --steps=40

For each network, one real cluster (deployment.cluster.launch_local: 2 ps tasks and 1 worker,
the full trainer `train_image_classifier.py`, asynchronous) trains --warmup_steps +
--steps steps in its own private network namespace, whose only interface is its
loopback. Two measurements of the same traffic:

  * payload: the trainer traces its first step and logs what it received from and sent
    to each ps task (`Traffic: ...`, deployment.trace.traffic: the RecvTensor sizes of the
    step, gRPC's own record of every tensor that crossed tasks);
  * wire: the namespace's `lo` counters (/proc/<pid>/net/dev of a task: every byte one
    task sends to another is transmitted once on lo), read when the chief logs the step
    after --warmup_steps and its last step: bytes per step with gRPC, HTTP/2, TCP and IP
    framing, and whatever else the job sends meanwhile (small).

lenet and cifarnet read converted digits, i3d (depth 1, the seeds' network) small
synthetic clips (--clip_frames x 32 x 32: the variables, and so the bytes, do not depend on
the clip size; the logits do on the classes: 8 here, 101 for UCF101 add 0.38 MB each way).
Each network's computed size (4 bytes per variable element of its checkpoint) is printed
beside the measurements.

Then the capacity arithmetic, for N workers (--worker_counts) and links of --link_gbps:
each step a ps task's link carries, each way, the workers' traffic to and from the
variables it holds. With P ps tasks sharing the variables evenly, a step needs
N x B / P bytes per direction per ps link, B = max(bytes in, bytes out) per worker step
(wire), so moving them takes N x B x 8 / (P x R) seconds at R bit/s. P is the smallest
count with that at most the step's compute time T (--step_secs, else the step time
measured here), so the transfer can hide behind the compute. Two limits no count of ps
tasks lifts are marked: `link`, one worker's own B takes longer than T on its link;
`variable`, the ps task that holds the largest variable cannot move N times its bytes
within T (a variable is placed whole; deployment.model_deploy balances the others by
bytes). Prints one JSON line per network, the tables in Markdown (docs/cluster.md) and a
machine line. Run from the repository root.
Exit status: 0 done; 2 bad flags, or no private network namespace here (one `error:`
line).
"""

import dataclasses
import datetime
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from typing import Optional

import numpy as np
from absl import app, flags

from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment.cluster import launch_local
from deployment.cluster.netns import NamespaceUnavailable
from resolve import names
from tf_compat import tf

VIDEO_NETWORKS = ('i3d',)
_STEP = re.compile(r'\] step (\d+)(?: of \d+)?: loss = ')
_TRAFFIC = re.compile(r'Traffic: this step received ([\d.]+) MB \(([^)]*)\) and sent '
                      r'([\d.]+) MB \(([^)]*)\)')


@dataclasses.dataclass(frozen=True)
class CapacitySettings:
  """What is measured and what the arithmetic assumes; `check_settings` holds the rules."""
  # Measurement.
  models: tuple[str, ...] = param(('lenet', 'cifarnet', 'i3d'), 'Networks to measure.')
  warmup_steps: int = param(5, 'Steps before the wire counter is first read.')
  steps: int = param(30, 'Steps measured on the wire counter.')
  clip_frames: int = param(4, 'Frames of the video networks\' (small) training clips.')
  # Arithmetic.
  worker_counts: tuple[int, ...] = param((10, 25, 100), 'Worker counts N of the table.')
  link_gbps: tuple[float, ...] = param((1.0, 10.0, 25.0), 'Link rates R of the table, '
                                       'Gb/s each way (full duplex).')
  step_secs: tuple[str, ...] = param(
      ('i3d:1.3',), 'Compute time T of one worker step, name:seconds, for the networks '
      'whose step measured here is not the one to plan for (default: i3d as the 10-node '
      'recipe estimates it for 8 clips of 64x224x224 on a 16 GB GPU); the others use '
      'their step time measured in this run.')
  # Directories.
  work_dir: Optional[str] = param(None, 'Data, train directories, logs; default: temporary.')
  random_seed: Optional[int] = param(
      None, 'Passed to every training run as --random_seed (its weights and batches then '
      'repeat run to run); unset: unseeded, as the trainer.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).


def check_settings(settings):
  """-> {network: T seconds} of --step_secs; ConfigError naming the flag otherwise."""
  for name in settings.models:
    names.network_spec(name)
  try:
    step_secs = {k: float(v) for k, v in (item.split(':') for item in settings.step_secs)}
  except ValueError:
    raise errors.ConfigError('--step_secs=%s is not accepted: use name:seconds,...'
                             % ','.join(settings.step_secs)) from None
  if step_secs and min(step_secs.values()) <= 0:
    raise errors.ConfigError('--step_secs=%s is not accepted: times must be > 0'
                             % ','.join(settings.step_secs))
  if settings.steps < 5 or settings.warmup_steps < 1 or settings.clip_frames < 1:
    raise errors.ConfigError('--steps=%d --warmup_steps=%d --clip_frames=%d are not '
                             'accepted: use --steps >= 5, the others >= 1' % (
                                 settings.steps, settings.warmup_steps, settings.clip_frames))
  if min(settings.worker_counts) < 1 or min(settings.link_gbps) <= 0:
    raise errors.ConfigError('--worker_counts and --link_gbps must be positive')
  return step_secs


def _digits(work_dir):
  from datasets.conversion.convert_images import convert  # pylint: disable=import-outside-toplevel
  directory = os.path.join(work_dir, 'digits')
  if not os.path.exists(os.path.join(directory, 'dataset_info.json')):
    convert('digits', directory)
  return directory


def _videos(work_dir):
  """Small synthetic motion videos (8 classes) converted as video_folder records."""
  # pylint: disable=import-outside-toplevel
  from datasets.conversion.convert_videos import VideoConversion, convert_videos
  from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
  directory = os.path.join(work_dir, 'videos_rgb')
  if not os.path.exists(os.path.join(directory, 'dataset_info.json')):
    made = make_synthetic_videos(os.path.join(work_dir, 'videos'), num_classes=8,
                                 videos_per_class=4, min_frames=8, max_frames=12,
                                 sizes=((48, 64),), seed=1)
    convert_videos(VideoConversion(
        dataset_name='video_folder', output_dir=directory, video_dir=made['video_dir'],
        splits_dir=made['split_dir'], short_side=32, num_shards=2, num_processes=2,
        progress=False))
  return directory


def trainer_flags(settings, model, data_dir, train_dir):
  steps = settings.warmup_steps + settings.steps
  flags_ = ['--model_name=' + model, '--dataset_dir=' + data_dir, '--train_dir=' + train_dir,
            '--optimizer=sgd', '--learning_rate=0.001', '--learning_rate_decay_type=fixed',
            '--max_number_of_steps=%d' % steps, '--log_every_n_steps=1', '--num_readers=1',
            '--num_preprocessing_threads=1', '--save_interval_secs=3600',
            '--save_summaries_secs=3600', '--recovery_wait_secs=0.2',
            '--step_timeout_secs=600']
  if settings.random_seed is not None:
    flags_.append('--random_seed=%d' % settings.random_seed)
  if model in VIDEO_NETWORKS:
    return flags_ + ['--dataset_name=video_folder', '--batch_size=1',
                     '--clip_frames=%d' % settings.clip_frames, '--train_image_size=32']
  return flags_ + ['--dataset_name=digits', '--batch_size=16']


def lo_bytes(pid):
  """Bytes transmitted on `lo` in the network namespace of process `pid`."""
  with open('/proc/%d/net/dev' % pid) as table:
    for line in table:
      if line.strip().startswith('lo:'):
        return int(line.split(':', 1)[1].split()[8])
  raise RuntimeError('no lo in /proc/%d/net/dev' % pid)


def _chief_steps(cluster):
  with open(cluster.chief.log_path, errors='replace') as log:
    return [int(s) for s in _STEP.findall(log.read())]


def _read_wire(cluster, settings, deadline):
  """[(step, lo bytes)] at the chief's first line >= warmup_steps and at its last."""
  pid = cluster.task('ps-0').process.pid
  readings, last = [], None
  while time.time() < deadline and cluster.chief.returncode is None:
    steps = _chief_steps(cluster)
    if steps and steps[-1] != last and steps[-1] >= settings.warmup_steps:
      last = steps[-1]
      readings.append((last, lo_bytes(pid)))
    time.sleep(0.02)
  return readings


def measure(settings, model, data_dir, work_dir):
  """One network's run: its JSON record (bytes per worker step, payload and wire)."""
  train_dir = os.path.join(work_dir, 'train_' + model)
  command = [sys.executable, 'train_image_classifier.py'] + trainer_flags(
      settings, model, data_dir, train_dir)
  cluster = launch_local.LocalCluster(2, 1, command, os.path.join(train_dir, 'logs'),
                                       isolation='namespace')
  start = time.time()
  with cluster:
    readings = _read_wire(cluster, settings, start + 3600)
    status = cluster.supervise(lambda: False, grace_secs=60)
  with open(cluster.chief.log_path) as log:
    text = log.read()
  if status != 0 or len(readings) < 2:
    raise RuntimeError('%s: status %s, %d readings\n%s' % (model, status, len(readings),
                                                           text[-3000:]))
  (s0, b0), (s1, b1) = readings[0], readings[-1]
  found = _TRAFFIC.search(text)
  if found is None:
    raise RuntimeError('%s: no Traffic line in the chief log' % model)
  return dict(network=model, seconds=round(time.time() - start, 1),
              secs_per_step=_secs_per_step(text, settings.warmup_steps),
              payload_in_mb=float(found.group(1)), payload_out_mb=float(found.group(3)),
              payload_in_by_ps=found.group(2), payload_out_by_ps=found.group(4),
              wire_mb_per_step=round((b1 - b0) / (s1 - s0) / 1e6, 3),
              wire_steps=s1 - s0, **_computed(train_dir))


def _secs_per_step(text, warmup_steps):
  times = re.findall(r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*\] step (\d+)', text, re.M)
  points = [(int(h) * 3600 + int(m) * 60 + float(s), int(n)) for h, m, s, n in times
            if int(n) >= warmup_steps]
  (t0, n0), (t1, n1) = points[0], points[-1]
  return round((t1 - t0) / max(1, n1 - n0), 4)


def _computed(train_dir):
  """Bytes of the checkpoint's variables (4 per element: all are float32 here), and the
  largest one's."""
  reader = tf.train.load_checkpoint(train_dir)
  sizes = {name: 4 * int(np.prod(shape)) for name, shape in
           reader.get_variable_to_shape_map().items()
           if name != 'global_step' and not name.startswith('input_position_')}
  largest = max(sizes, key=sizes.get)
  return dict(variables_mb=round(sum(sizes.values()) / 1e6, 3),
              largest_variable=largest, largest_variable_mb=round(sizes[largest] / 1e6, 3))


def ps_needed(bytes_per_step, largest_bytes, workers, gbps, step_secs):
  """The smallest P with workers x bytes x 8 / (P x R) <= T, as an int; 'link' when one
  worker's own traffic takes longer than T on its link, 'variable' when the ps task
  holding the largest variable cannot move workers x its bytes within T (no count of ps
  tasks helps: a variable is placed whole)."""
  per_link_step = gbps * 1e9 / 8 * step_secs  # bytes one link moves each way within T
  if bytes_per_step > per_link_step:
    return 'link'
  if workers * largest_bytes > per_link_step:
    return 'variable'
  return max(1, math.ceil(workers * bytes_per_step / per_link_step))


def tables(records, settings, step_secs):
  """The Markdown tables of docs/cluster.md (measured bytes, then ps tasks needed)."""
  rows = ['| network | variables, computed (largest) | payload per step, in / out '
          '(trace) | by ps task, in | wire per step, both ways (lo) | wire / payload |',
          '|---|---|---|---|---|---|']
  for r in records:
    payload = r['payload_in_mb'] + r['payload_out_mb']
    rows.append('| %s | %.2f MB (%s %.2f MB) | %.2f / %.2f MB | %s | %.2f MB | %.3f |' % (
        r['network'], r['variables_mb'], r['largest_variable'], r['largest_variable_mb'],
        r['payload_in_mb'], r['payload_out_mb'], r['payload_in_by_ps'],
        r['wire_mb_per_step'], r['wire_mb_per_step'] / payload))
  rows += ['', '| network | T | N | %s |' % ' | '.join('%g Gb/s' % g for g in settings.link_gbps),
           '|---|---|---|' + '---|' * len(settings.link_gbps)]
  for r in records:
    secs = step_secs.get(r['network'], r['secs_per_step'])
    wire_ratio = r['wire_mb_per_step'] / (r['payload_in_mb'] + r['payload_out_mb'])
    largest = r['largest_variable_mb'] * 1e6 * wire_ratio
    for n in settings.worker_counts:
      cells = [ps_needed(busier_way(r), largest, n, g, secs) for g in settings.link_gbps]
      rows.append('| %s | %g s | %d | %s |' % (r['network'], secs, n, ' | '.join(
          str(c) for c in cells)))
  return '\n'.join(rows)


def busier_way(record):
  """Wire bytes per worker step in its busier direction: the lo total shared out as the
  payload is (in: the variables read, out: the gradients sent)."""
  payload_in, payload_out = record['payload_in_mb'], record['payload_out_mb']
  return record['wire_mb_per_step'] * 1e6 * max(payload_in, payload_out) / (
      payload_in + payload_out)


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  settings = config_from_flags(CapacitySettings, FLAGS)
  try:
    step_secs = check_settings(settings)
  except errors.ConfigError as error:
    return errors.report(error)
  work_dir = settings.work_dir or tempfile.mkdtemp(prefix='bench_capacity_')
  load = os.getloadavg()
  records = []
  try:
    for model in settings.models:
      data = _videos(work_dir) if model in VIDEO_NETWORKS else _digits(work_dir)
      records.append(measure(settings, model, data, work_dir))
      print(json.dumps(records[-1]), flush=True)
  except NamespaceUnavailable as error:
    return errors.report(errors.ConfigError(
        'the wire measurement needs a private network namespace, and this host gives none '
        '(%s)' % error))
  print(tables(records, settings, step_secs))
  print('machine: %s, %d cores, Python %s, TensorFlow %s; load average before %s, after %s; '
        '%s' % (platform.machine(), os.cpu_count(), platform.python_version(),
                tf.__version__, '/'.join('%.2f' % x for x in load),
                '/'.join('%.2f' % x for x in os.getloadavg()),
                datetime.date.today().isoformat()))
  return errors.OK


if __name__ == '__main__':
  define_flags(CapacitySettings)
  app.run(main, flags_parser=parse_flags)
