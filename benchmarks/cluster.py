"""Parameter-server scaling: whole-job examples/sec, 1 ps + 1 worker vs 1 ps + 2 workers.

    python -m benchmarks.cluster                  # cifarnet on digits, batch 128, async
    python -m benchmarks.cluster --batch_size=64 --steps_per_worker=120 --warmup_steps=30
    python -m benchmarks.cluster --sync           # synchronous, replicas_to_aggregate = 2
    python -m benchmarks.cluster --sync --two_jobs  # and the machine's own ceiling
    python -m benchmarks.cluster --sync --two_jobs --allreduce  # and 2 workers without ps

The batch matters: every step moves all variables (cifarnet: 1.7 M, 7 MB) to and from
the parameter server, whose CPU time (top: about 0.4 core while it serves one worker at
batch 64) comes out of the workers' two cores once there are two workers; a larger
batch spreads it over more examples.

Each configuration is a real cluster started by deployment.launch_local (one process
per task, 127.0.0.1, the full training pipeline: train_image_classifier.py reading
converted digits), with every worker held to its own core (worker i on CPU i, through
os.sched_setaffinity); the parameter server is not pinned. The whole job's
examples/sec comes from the chief's progress lines: global steps advanced times
examples per global step, divided by the time between the first line after
`--warmup_steps` and the last line. Configurations alternate within each round (the
order flips every round) after one discarded warm-up round (the harness of
training/doctor/rounds.py), so both see the same machine state; the figure is the median
of the per-round ratios. Other work on the machine
moves these numbers, and hurts 2 workers (which need both cores) more than 1: each run
records the CPU that processes outside the benchmark used meanwhile (`other_cores`,
from /proc/stat), and a second summary keeps only the rounds where that stayed under
`--quiet_cores`. Each run also records the CPU every task spent per global step over the
measured window (`CpuSampler`: /proc/<pid>/stat every 0.25 s), which other work on the
machine barely moves, and the summaries give from it the ratio two cores of the job's
own would allow at best (`cpu_bound_ratio`). `--two_jobs` adds a third configuration to
every round: two independent 1-ps 1-worker jobs at once, worker j on core j, sharing only
the machine (its cores' caches, memory bandwidth and clock): their summed examples/sec is
what two workers could reach here with no runtime between them, so
`two_workers_of_two_jobs` is the share of that ceiling the 2-worker job reaches.
`--allreduce` adds one more (issue 40): 2 workers without a parameter server
(launch_local's `--num_ps=0`, the trainer's `--variable_update=replicated`), worker i on
core i, the same model, batch and steps per worker; every worker runs every global step,
so a global step holds both workers' batches, as a synchronous one does (the `allreduce_*`
summaries: against 1 worker, the 2-worker ps job of the same run and the two jobs).
Prints one JSON line per run and the summaries; what it reads from a run (the chief's log,
/proc) is benchmarks/cluster_readings.py. Run from the repository root. Exit
status: 0 done, 2 bad flags (one `error:` line).
"""

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from typing import Optional

from absl import app, flags

from benchmarks import cluster_readings as readings
from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment.cluster import launch_local
from resolve import names
from training.doctor import rounds as harness


@dataclasses.dataclass(frozen=True)
class ClusterSettings:
  """What the parameter-server benchmark runs; `check_settings` holds its rules."""
  # Training.
  model_name: str = param('cifarnet', 'Network from the nets registry.')
  batch_size: int = param(128, 'Examples per worker step.')
  steps_per_worker: int = param(80, 'Training steps each worker runs.')
  warmup_steps: int = param(20, 'Global steps left out of the measurement.')
  sync: bool = param(False, 'Synchronous replicas (all workers per update).')
  inter_op_threads: int = param(0, 'TF_NUM_INTEROP_THREADS of every task (0: unset, the '
                                'runtime\'s choice; 1 is what a one-core task had before '
                                'deployment.cluster.ps_cluster.server_inter_op_threads).')
  # Rounds.
  two_jobs: bool = param(False, 'Also run, in each round, two independent 1-worker jobs '
                         'at once (each with its own ps, worker j on core j): what two '
                         'workers could reach on this machine with nothing shared.')
  allreduce: bool = param(False, 'Also run, in each round, 2 workers without parameter '
                          'servers that all-reduce their gradients '
                          '(--variable_update=replicated, worker i on core i).')
  rounds: int = param(5, 'Measured rounds (after one warm-up round).')
  quiet_cores: float = param(0.15, 'Also summarize the rounds in which processes outside '
                             'the benchmark used at most this many cores.')
  # Directories and isolation.
  dataset_dir: Optional[str] = param(None, 'Converted digits; default: converted into a '
                                     'temporary directory.')
  work_dir: Optional[str] = param(None, 'Train and log directories; default: temporary.')
  isolation: str = param('auto', 'As launch_local: one of %s.'
                         % ', '.join(launch_local.ISOLATIONS))
  timeout_secs: float = param(300.0, 'Every task\'s --startup_timeout_secs and '
                              '--step_timeout_secs: a run that stalls ends (exit 138) '
                              'instead of hanging.')
  random_seed: Optional[int] = param(
      None, 'Passed to every training run as --random_seed (its weights and batches then '
      'repeat run to run); unset: unseeded, as the trainer.')


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).



def check_settings(settings):
  """Returns `settings` if the benchmark can run with them; else ConfigError naming the flag."""
  names.network_spec(settings.model_name)
  if settings.isolation not in launch_local.ISOLATIONS:
    raise errors.ConfigError('--isolation=%s is not accepted: use one of %s'
                             % (settings.isolation, ', '.join(launch_local.ISOLATIONS)))
  if settings.inter_op_threads < 0:
    raise errors.ConfigError('--inter_op_threads=%d is not accepted: use 0 (the runtime\'s '
                             'choice) or more' % settings.inter_op_threads)
  if settings.timeout_secs <= 0:
    raise errors.ConfigError('--timeout_secs=%g is not accepted: use more than 0 (a run '
                             'must not wait forever)' % settings.timeout_secs)
  if settings.rounds < 1:
    raise errors.ConfigError('--rounds=%d is not accepted: use 1 or more (the summary is '
                             'a median over rounds)' % settings.rounds)
  return settings


def mode_of(settings, allreduce=False):
  """How a run's workers meet: 'allreduce' (no ps), 'sync' or 'async' (with a ps)."""
  return 'allreduce' if allreduce else 'sync' if settings.sync else 'async'


def examples_per_global_step(settings, mode, num_workers):
  """A synchronous or all-reduce global step holds every worker's batch (each worker runs
  every step); an asynchronous one is one worker's."""
  return settings.batch_size * (1 if mode == 'async' else num_workers)


def _train_flags(settings, dataset_dir, train_dir, num_workers, mode=None):
  """The trainer's flags for every task of one run (`mode`: mode_of's; None: with a ps,
  as settings.sync says)."""
  mode = mode or mode_of(settings)
  steps = settings.steps_per_worker * (num_workers if mode == 'async' else 1)
  flags_ = ['--dataset_name=digits', '--dataset_dir=' + dataset_dir,
            '--model_name=' + settings.model_name, '--train_dir=' + train_dir,
            '--batch_size=%d' % settings.batch_size, '--optimizer=sgd',
            '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
            '--max_number_of_steps=%d' % steps, '--log_every_n_steps=10',
            '--num_readers=1', '--num_preprocessing_threads=1',
            '--save_interval_secs=3600', '--save_summaries_secs=3600',
            '--startup_timeout_secs=%g' % settings.timeout_secs,
            '--step_timeout_secs=%g' % settings.timeout_secs, '--recovery_wait_secs=0.2']
  if mode == 'sync':
    flags_ += ['--sync_replicas', '--replicas_to_aggregate=%d' % num_workers]
  if mode == 'allreduce':
    flags_.append('--variable_update=replicated')
  if settings.random_seed is not None:
    flags_.append('--random_seed=%d' % settings.random_seed)
  return flags_


def run(settings, num_workers, dataset_dir, work_dir, name, allreduce=False):
  """One cluster run (with one ps, or without when `allreduce`); returns its JSON record.

  `other_cores`: CPU used meanwhile by processes outside this benchmark, in cores
  (the machine's busy time minus ours, over the run's wall time).
  """
  start, busy, own = time.time(), readings.busy_cpu_secs(), readings.own_cpu_secs()
  record = _run_cluster(settings, num_workers, dataset_dir, work_dir, name,
                        mode_of(settings, allreduce))
  elapsed = time.time() - start
  other = (readings.busy_cpu_secs() - busy) - (readings.own_cpu_secs() - own)
  record['other_cores'] = round(max(0.0, other) / elapsed, 2)
  return record


def _run_cluster(settings, num_workers, dataset_dir, work_dir, name, mode):
  """Starts the cluster, waits for it; its JSON record without `other_cores`."""
  cores = os.cpu_count() or 1
  return _run_clusters(settings, dataset_dir, work_dir, [name],
                       [[i % cores for i in range(num_workers)]], mode)[0]


def _run_clusters(settings, dataset_dir, work_dir, names_, worker_cores, mode):
  """Runs independent clusters at once, cluster j named names_[j], with one ps ('async',
  'sync') or none ('allreduce') and a worker pinned to each core of worker_cores[j];
  waits for all; [JSON record of each]."""
  with contextlib.ExitStack() as stack:
    clusters = []
    for name, cores in zip(names_, worker_cores):
      train_dir = os.path.join(work_dir, name)
      command = [sys.executable, 'train_image_classifier.py'] + _train_flags(
          settings, dataset_dir, train_dir, len(cores), mode)
      env = ({'TF_NUM_INTEROP_THREADS': str(settings.inter_op_threads)}
             if settings.inter_op_threads else {})
      cluster = stack.enter_context(launch_local.LocalCluster(
          0 if mode == 'allreduce' else 1, len(cores), command, os.path.join(train_dir, 'logs'),
          isolation=settings.isolation, env=env,
          cpu_affinity={'worker-%d' % i: [core] for i, core in enumerate(cores)}))
      clusters.append((cluster, stack.enter_context(readings.CpuSampler(cluster))))
    statuses = [None] * len(clusters)
    def supervise(j):
      statuses[j] = clusters[j][0].supervise(lambda: False, grace_secs=60)
    threads = [threading.Thread(target=supervise, args=(j,)) for j in range(len(clusters))]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
  return [_record(settings, name, cluster, sampler, status, mode)
          for name, (cluster, sampler), status in zip(names_, clusters, statuses)]


def _record(settings, name, cluster, sampler, status, mode):
  """The JSON record of one finished cluster (RuntimeError if it failed)."""
  worker_tasks = [t for t in cluster.tasks if t.job == 'worker']
  num_workers = len(worker_tasks)
  with open(cluster.chief.log_path) as log:
    chief = log.read()
  if status != 0:
    raise RuntimeError('%s: exit status %d\n%s' % (name, status, chief[-3000:]))
  per_step = examples_per_global_step(settings, mode, num_workers)
  (t0, s0), (t1, s1) = readings.job_window(chief, settings.warmup_steps)
  rate, window = (s1 - s0) * per_step / (t1 - t0), t1 - t0
  cpu = {t.name: round(sampler.between(t.name, t0, t1) / (s1 - s0), 4)
         for t in cluster.tasks}
  workers = []
  for task in worker_tasks:
    with open(task.log_path) as log:
      rates = [float(r) for s, r in readings.WORKER_RATE.findall(log.read())
               if int(s) >= settings.warmup_steps]
    workers.append(round(statistics.median(rates), 1) if rates else None)
  return {'run': name, 'workers': num_workers, 'mode': mode,
          'job_examples_per_sec': round(rate, 1),
          'window_secs': round(window, 1), 'worker_examples_per_sec': workers,
          'secs_per_global_step': round(window / (s1 - s0), 4),
          'cpu_secs_per_global_step': cpu}


def run_two_jobs(settings, dataset_dir, work_dir, name):
  """The ceiling two workers can reach on this machine: two independent 1-ps 1-worker
  jobs at once, worker j pinned to core j (as the 2-worker run's workers are), sharing
  nothing but the machine. Returns one record: their summed examples/sec, each job's
  record under 'jobs', and `other_cores` as `run` measures it."""
  start, busy, own = time.time(), readings.busy_cpu_secs(), readings.own_cpu_secs()
  cores = os.cpu_count() or 1
  jobs = _run_clusters(settings, dataset_dir, work_dir,
                       ['%s_job%d' % (name, j) for j in range(2)], [[0], [1 % cores]],
                       mode_of(settings))
  elapsed = time.time() - start
  other = (readings.busy_cpu_secs() - busy) - (readings.own_cpu_secs() - own)
  return {'run': name, 'workers': 'two jobs of 1',
          'job_examples_per_sec': round(sum(j['job_examples_per_sec'] for j in jobs), 1),
          'jobs': jobs, 'other_cores': round(max(0.0, other) / elapsed, 2)}


def _dataset_dir(settings, work_dir):
  """settings.dataset_dir, or digits converted into work_dir."""
  if settings.dataset_dir:
    return settings.dataset_dir
  from datasets.conversion.convert_images import convert  # pylint: disable=import-outside-toplevel
  directory = os.path.join(work_dir, 'digits')
  convert('digits', directory)
  return directory


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(ClusterSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  compare(settings)
  return errors.OK


def compare(settings):
  """1 against 2 workers (and two jobs, and 2 workers all-reducing, if asked), alternating
  in each round (the order flips every round) after one warm-up round; prints one JSON
  line per run, the summaries and a machine line."""
  work_dir = settings.work_dir or tempfile.mkdtemp(prefix='bench_cluster_')
  dataset_dir = _dataset_dir(settings, work_dir)
  load_before = os.getloadavg()
  measures = {n: lambda index, n=n: run(settings, n, dataset_dir, work_dir,
                                        'round%d_%dw' % (index, n)) for n in (1, 2)}
  if settings.two_jobs:
    measures['jobs'] = lambda index: run_two_jobs(settings, dataset_dir, work_dir,
                                                  'round%d_jobs' % index)
  if settings.allreduce:
    measures['allreduce'] = lambda index: run(settings, 2, dataset_dir, work_dir,
                                              'round%d_allreduce' % index, allreduce=True)

  def printed(index, results):
    for result in results.values():
      print(json.dumps(dict(result, warmup=index == 0)), flush=True)

  samples = harness.alternate(measures, settings.rounds, flip=True,
                              after_round=printed).samples
  rounds = [{n: samples[n][index] for n in measures} for index in range(settings.rounds)]
  print(json.dumps(_summary(settings, rounds, 'all rounds')))
  quiet = [r for r in rounds if max(v['other_cores'] for v in r.values()) <= (
      settings.quiet_cores)]
  if quiet:
    print(json.dumps(_summary(settings, quiet, 'rounds with other processes <= %g cores'
                              % settings.quiet_cores)))
  print('machine: %s, %d cores, Python %s; load average before %s, after %s; %s' % (
      platform.machine(), os.cpu_count(), platform.python_version(),
      '/'.join('%.2f' % x for x in load_before),
      '/'.join('%.2f' % x for x in os.getloadavg()),
      datetime.date.today().isoformat()))


def _summary(settings, rounds, which):
  one = [r[1]['job_examples_per_sec'] for r in rounds]
  two = [r[2]['job_examples_per_sec'] for r in rounds]
  median, ratios = harness.median_ratio(two, one)
  summary = {'which': which, 'rounds': len(rounds), 'model': settings.model_name,
          'batch_per_worker': settings.batch_size,
          'mode': 'sync' if settings.sync else 'async',
          'inter_op_threads': settings.inter_op_threads or 'runtime',
          'one_worker_examples_per_sec': round(statistics.median(one), 1),
          'two_workers_examples_per_sec': round(statistics.median(two), 1),
          'median_ratio': median, 'ratios': ratios,
          'cpu_secs_per_global_step': {n: _median_cpu(rounds, n) for n in (1, 2)},
          'two_core_bound_ratio': round(statistics.median(
              [cpu_bound_ratio(r[1], r[2], settings.sync) for r in rounds]), 3)}
  if settings.allreduce:
    summary.update(_allreduce_summary(settings, rounds, one, two))
  if settings.two_jobs:
    jobs = [r['jobs']['job_examples_per_sec'] for r in rounds]
    summary.update({
        'two_jobs_examples_per_sec': round(statistics.median(jobs), 1),
        'two_jobs_ratio': harness.median_ratio(jobs, one)[0],
        'two_workers_of_two_jobs': harness.median_ratio(two, jobs)[0],
        'two_jobs_cpu_secs_per_step': {
            name: round(statistics.median(j['cpu_secs_per_global_step'][name]
                                          for r in rounds for j in r['jobs']['jobs']), 4)
            for name in ('ps-0', 'worker-0')}})
  return summary


def _allreduce_summary(settings, rounds, one, two):
  """The 2-worker all-reduce job against 1 worker, the 2-worker ps job ('async' or
  'sync', as run) and, with --two_jobs, the two independent jobs; each a median of
  per-round ratios."""
  reduced = [r['allreduce']['job_examples_per_sec'] for r in rounds]
  summary = {
      'allreduce_examples_per_sec': round(statistics.median(reduced), 1),
      'allreduce_ratio': harness.median_ratio(reduced, one)[0],
      'allreduce_ratios': harness.median_ratio(reduced, one)[1],
      'allreduce_vs_two_workers_%s' % mode_of(settings): harness.median_ratio(reduced,
                                                                              two)[0],
      'allreduce_cpu_secs_per_global_step': _median_cpu(rounds, 'allreduce'),
      'allreduce_two_core_bound_ratio': round(statistics.median(
          [cpu_bound_ratio(r[1], r['allreduce'], True) for r in rounds]), 3)}
  if settings.two_jobs:
    jobs = [r['jobs']['job_examples_per_sec'] for r in rounds]
    summary['allreduce_of_two_jobs'] = harness.median_ratio(reduced, jobs)[0]
  return summary


def _median_cpu(rounds, workers):
  names = rounds[0][workers]['cpu_secs_per_global_step']
  return {name: round(statistics.median(r[workers]['cpu_secs_per_global_step'][name]
                                        for r in rounds), 4) for name in names}


def cpu_bound_ratio(one, two, synchronous):
  """The highest 2-worker/1-worker ratio the runtime's CPU costs allow on two cores of
  the job's own, from the CPU each task spent per global step (load-independent, unlike
  the wall times): one worker cannot beat its own CPU plus the parameter server's (its
  step waits for the update); two workers, each with one core, cannot beat their job's
  CPU / 2 nor either worker's own CPU (an all-reduce job has no ps: its workers' CPU
  alone). A synchronous or all-reduce global step (`synchronous`) holds two worker
  batches, an asynchronous one one."""
  alone = sum(one['cpu_secs_per_global_step'].values())
  cpu = two['cpu_secs_per_global_step']
  together = max(sum(cpu.values()) / 2,
                 max(v for k, v in cpu.items() if k.startswith('worker')))
  return (2 if synchronous else 1) * alone / together


if __name__ == '__main__':
  define_flags(ClusterSettings)
  app.run(main, flags_parser=parse_flags)
