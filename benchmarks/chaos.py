"""The seeds' ten-node cluster, simulated: workers killed and restarted during a sync run.

    python -m benchmarks.chaos            # 2 ps + 10 workers, 2 backup, LeNet on digits
    python -m benchmarks.chaos --num_workers=4 --backup_workers=1 --kills=3 --chief_kills=1
    make stress                           # this, then the cluster tests under load

Every task runs the real trainer (`train_image_classifier.py`, synchronous,
`--replicas_to_aggregate` = workers - backup workers, `--sync_trace`) in one cluster on
127.0.0.1 started with deployment.cluster.launch_local's LocalCluster (what `python -m
deployment.launch_local` runs), in its private network namespace when this host allows
one. Once the job has reached --first_kill_step, a driver kills random workers with
SIGKILL, the chief among them (--chief_kills of the --kills), one every
--kill_every_secs (0.5x to 1.5x, seeded), each restarted --down_secs after it died; it
stops killing in the job's last tenth. Then it waits for every task to end and checks,
from the files the job leaves:

  * the job ended at --max_number_of_steps (the chief's end marker and last checkpoint);
  * global_step never went back: the chief's record of updates (sync_trace.tsv, appended
    by every incarnation of the chief) has strictly increasing steps, and every restarted
    task's session started at a step no lower than the one logged when it was killed;
  * no duplicate or stale gradient was applied: each update of the record took at least
    replicas_to_aggregate gradients, at most one per worker, all computed at its step
    (a chief that rejoins skips the step in flight: that step has no line);
  * every task exited 0 on its own (parameter servers included), its last log clean;
  * all within --time_limit_secs.

A killed chief may die after an update and before writing its line: such an update is
missing from the record, never wrong in it. Prints one line per kill, one JSON summary
and `chaos: PASS` or `chaos: FAIL` with the failed checks. Run from the repository root.
Exit status: 0 every check held; 1 a check failed; 2 bad flags (one `error:` line).
"""

import dataclasses
import datetime
import glob
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from typing import Optional

from absl import app, flags

from checkpoints.end_marker import FINISHED, read_end_marker
from core import errors
from core.params import (config_from_flags, define_flags, param, parse_flags,
                         reject_positional_arguments)
from deployment import sync_replicas
from deployment.cluster import launch_local

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE_FILE = 'sync_trace.tsv'  # training.train.SYNC_TRACE_FILE
_STEP = re.compile(r'\] step (\d+)(?: of \d+)?: loss = ')
_READY = re.compile(r'Session ready at global step (\d+)')


LOG_EVERY_N_STEPS = 5  # The tasks' progress lines: the driver's reading of the step.


@dataclasses.dataclass(frozen=True)
class ChaosSettings:
  """The cluster, the run and the kills; `check_settings` holds the rules."""
  # Cluster.
  num_ps: int = param(2, 'Parameter-server tasks.')
  num_workers: int = param(10, 'Worker tasks; worker 0 is the chief.')
  backup_workers: int = param(2, 'Workers beyond --replicas_to_aggregate: each update '
                              'takes workers - backup_workers gradients.')
  isolation: str = param('auto', 'As launch_local: one of %s.'
                         % ', '.join(launch_local.ISOLATIONS))
  # Training.
  model_name: str = param('lenet', 'Network from the nets registry.')
  batch_size: int = param(16, 'Examples per worker step.')
  max_number_of_steps: int = param(300, 'Global steps of the job.')
  # Chaos.
  kills: int = param(8, 'Workers killed (SIGKILL) and restarted during the run.')
  chief_kills: int = param(2, 'Of the kills, how many hit the chief (worker 0).')
  first_kill_step: int = param(20, 'No kill before the job reaches this global step.')
  kill_every_secs: float = param(15.0, 'Mean seconds between kills (each wait is drawn '
                                 'from 0.5x to 1.5x of it).')
  down_secs: float = param(2.0, 'Seconds a killed worker stays down before its restart.')
  seed: int = param(0, 'Seed of the kill plan and the waits.')
  time_limit_secs: float = param(600.0, 'The whole job must end within this.')
  # Directories.
  dataset_dir: Optional[str] = param(None, 'Converted digits; default: converted into the '
                                     'work directory.')
  work_dir: Optional[str] = param(None, 'Train directory and logs; default: temporary.')
  random_seed: Optional[int] = param(
      None, 'Passed to every training run as --random_seed (its weights and batches then '
      'repeat run to run); unset: unseeded, as the trainer.')


@dataclasses.dataclass
class ChaosReport:
  """What happened and which checks failed (`failures` empty: every check held)."""
  seconds: float = 0.0
  kills: list = dataclasses.field(default_factory=list)  # (secs, task, step at the kill)
  statuses: dict = dataclasses.field(default_factory=dict)
  updates: int = 0            # lines in the chief's record
  skipped_steps: int = 0      # steps without a line (rejoins, or a line the kill lost)
  final_step: Optional[int] = None
  failures: list = dataclasses.field(default_factory=list)

  @property
  def ok(self):
    return not self.failures


def check_settings(settings):
  """Returns `settings` if a chaos run can be made of them; else ConfigError."""
  if settings.num_ps < 1 or settings.num_workers < 2:
    raise errors.ConfigError('--num_ps=%d --num_workers=%d are not accepted: use at least '
                             '1 ps and 2 workers' % (settings.num_ps, settings.num_workers))
  if not 0 <= settings.backup_workers < settings.num_workers:
    raise errors.ConfigError('--backup_workers=%d is not accepted: use 0 to %d (fewer than '
                             'the workers)' % (settings.backup_workers,
                                               settings.num_workers - 1))
  if not 0 <= settings.chief_kills <= settings.kills:
    raise errors.ConfigError('--chief_kills=%d is not accepted: use 0 to --kills=%d'
                             % (settings.chief_kills, settings.kills))
  if not 0 < settings.first_kill_step < settings.max_number_of_steps * 0.9:
    raise errors.ConfigError('--first_kill_step=%d is not accepted: use 1 to 90%% of '
                             '--max_number_of_steps=%d' % (settings.first_kill_step,
                                                           settings.max_number_of_steps))
  if settings.isolation not in launch_local.ISOLATIONS:
    raise errors.ConfigError('--isolation=%s is not accepted: use one of %s'
                             % (settings.isolation, ', '.join(launch_local.ISOLATIONS)))
  return settings


def trainer_command(settings, dataset_dir, train_dir):
  """The command every task runs (LocalCluster appends its place in the cluster)."""
  aggregate = settings.num_workers - settings.backup_workers
  values = dict(
      dataset_name='digits', dataset_dir=dataset_dir, model_name=settings.model_name,
      train_dir=train_dir, batch_size=settings.batch_size, optimizer='sgd',
      learning_rate=0.01, learning_rate_decay_type='fixed', num_readers=1,
      num_preprocessing_threads=1, log_every_n_steps=LOG_EVERY_N_STEPS,
      max_number_of_steps=settings.max_number_of_steps, save_interval_secs=10,
      save_summaries_secs=600, recovery_wait_secs=0.5, startup_timeout_secs=300,
      step_timeout_secs=300, stop_grace_secs=10, replicas_to_aggregate=aggregate)
  if settings.random_seed is not None:
    values['random_seed'] = settings.random_seed
  return ([sys.executable, os.path.join(ROOT, 'train_image_classifier.py'),
           '--sync_replicas', '--sync_trace'] +
          ['--%s=%s' % item for item in values.items()])


def kill_plan(settings, rng):
  """Worker indices to kill, in order: chief_kills zeros among random other workers,
  never the same task twice in a row."""
  others = [rng.randrange(1, settings.num_workers)
            for _ in range(settings.kills - settings.chief_kills)]
  plan = others + [0] * settings.chief_kills
  for _ in range(100):
    rng.shuffle(plan)
    if all(a != b for a, b in zip(plan, plan[1:])):
      break
  return plan


def _log(task):
  try:
    with open(task.log_path, errors='replace') as log:
      return log.read()
  except FileNotFoundError:
    return ''


def _last_start(text):
  return text.rsplit('=== ', 1)[-1]


def logged_step(cluster):
  """The highest global step any worker has logged (a lower bound of the real one)."""
  return max([0] + [int(s) for t in cluster.tasks if t.job == 'worker'
                    for s in _STEP.findall(_log(t))])


def _unexpected_exit(cluster):
  """The first task that ended with a non-zero status (killed ones are restarted at
  once, so a task found ended this way ended on its own)."""
  return next((t for t in cluster.tasks if t.returncode not in (None, 0)), None)


def _last_line(task):
  lines = [line for line in _log(task).splitlines() if line.strip()]
  return lines[-1][-300:] if lines else '(empty log)'


def _wait(condition, deadline, poll=0.2):
  while time.time() < deadline:
    if condition():
      return True
    time.sleep(poll)
  return False


def unleash(cluster, settings, rng, start, deadline, say=print):
  """Kills and restarts workers by the plan; returns [(secs, task, step at the kill)] and
  the failures met (a task that died on its own, the job not reaching the first kill)."""
  kills = []
  if not _wait(lambda: logged_step(cluster) >= settings.first_kill_step or
               _unexpected_exit(cluster), deadline):
    return kills, ['the job did not reach step %d by the time limit'
                   % settings.first_kill_step]
  last_kill_step = settings.max_number_of_steps * 0.9
  for index in kill_plan(settings, rng):
    stray = _unexpected_exit(cluster)
    if stray is not None:
      return kills, ['%s exited with status %s on its own: %s' % (
          stray.name, stray.returncode, _last_line(stray))]
    time.sleep(rng.uniform(0.5, 1.5) * settings.kill_every_secs)
    step, task = logged_step(cluster), cluster.task('worker-%d' % index)
    # The job may be up to a progress line past its logged step: a kill there could land
    # on a task leaving a finished job, whose restart would find no parameter server.
    if (step + LOG_EVERY_N_STEPS >= last_kill_step or time.time() > deadline
        or task.returncode is not None):
      break
    task.process.send_signal(signal.SIGKILL)
    task.process.wait()
    kills.append((round(time.time() - start, 1), task.name, step))
    say('chaos: %5.1f s  killed %s at logged step %d; restart in %g s'
        % (kills[-1][0], task.name, step, settings.down_secs), flush=True)
    time.sleep(settings.down_secs)
    cluster.start_task(task.name)
  stray = _unexpected_exit(cluster)
  return kills, [] if stray is None else ['%s exited with status %s on its own: %s' % (
      stray.name, stray.returncode, _last_line(stray))]


def run_chaos(settings, dataset_dir, work_dir, say=print):
  """One chaos run in `work_dir` (train/ and logs/); returns its ChaosReport."""
  train_dir = os.path.join(work_dir, 'train')
  cluster = launch_local.LocalCluster(
      settings.num_ps, settings.num_workers, trainer_command(settings, dataset_dir,
                                                             train_dir),
      os.path.join(work_dir, 'logs'), isolation=settings.isolation)
  rng = random.Random(settings.seed)
  report = ChaosReport()
  start = time.time()
  deadline = start + settings.time_limit_secs
  with cluster:
    say(cluster.startup_line(), flush=True)
    report.kills, report.failures = unleash(cluster, settings, rng, start, deadline, say)
    if report.failures:  # Nothing more to learn: stop the others (workers, then ps).
      cluster.stop(grace_secs=30)
    if not _wait(lambda: all(t.returncode is not None for t in cluster.tasks), deadline):
      report.failures.append('still running at the time limit (%g s): %s' % (
          settings.time_limit_secs, ', '.join(t.name for t in cluster.running())))
    report.seconds = round(time.time() - start, 1)
    report.statuses = {t.name: t.returncode for t in cluster.tasks}
  report.failures += check_run(cluster, settings, train_dir, report)
  return report


def check_run(cluster, settings, train_dir, report):
  """The checks of the module doc on the run's files; fills `report`; -> failures."""
  failures = []
  for task in cluster.tasks:
    text = _last_start(_log(task))
    if task.returncode != 0:
      failures.append('%s exited with status %s' % (task.name, task.returncode))
    for bad in ('Traceback', 'Coordinator stopped with threads still running'):
      if bad in text:
        failures.append('%s: %r in its last log' % (task.name, bad))
  marker = read_end_marker(train_dir)
  report.final_step = marker.global_step if marker else None
  if (marker is None or marker.status != FINISHED or
      marker.global_step != settings.max_number_of_steps):
    failures.append('the job did not finish at step %d (end marker: %s)'
                    % (settings.max_number_of_steps, marker))
  steps = sorted(int(re.search(r'model\.ckpt-(\d+)\.index$', p).group(1))
                 for p in glob.glob(os.path.join(train_dir, 'model.ckpt-*.index')))
  if steps[-1:] != [settings.max_number_of_steps]:
    failures.append('last checkpoint at step %s' % (steps[-1:] or None))
  failures += _check_record(settings, train_dir, report)
  failures += _check_restarts(cluster, report.kills)
  if report.seconds > settings.time_limit_secs:
    failures.append('took %.0f s (limit %g s)' % (report.seconds, settings.time_limit_secs))
  return failures


def _check_record(settings, train_dir, report):
  """Updates strictly increasing; each one >= aggregate gradients of distinct workers,
  all of its step."""
  trace = sync_replicas.read_trace(os.path.join(train_dir, TRACE_FILE))
  aggregate = settings.num_workers - settings.backup_workers
  report.updates = len(trace)
  report.skipped_steps = settings.max_number_of_steps - len(trace)
  failures = []
  for before, after in zip(trace, trace[1:]):
    if after.step <= before.step:
      failures.append('the record goes back: update %d after %d' % (after.step, before.step))
  for line in trace:
    if max(line.counts) > 1 or sum(line.counts) < aggregate:
      failures.append('update %d took %s gradients per worker' % (line.step, line.counts))
    stale = [s for s, c in zip(line.steps, line.counts) if c and s != line.step]
    if stale:
      failures.append('update %d took gradients of steps %s' % (line.step, stale))
  if not trace or trace[-1].step != settings.max_number_of_steps - 1:
    failures.append('the record does not end with update %d'
                    % (settings.max_number_of_steps - 1))
  return failures


def _check_restarts(cluster, kills):
  """Each restart's session began at a step >= the step logged when its task was killed
  (a restart killed again before its session was ready has none; the last start of a
  task must have one)."""
  failures = []
  for task in cluster.tasks:
    starts = _log(task).split('=== ')[1:]
    killed_at = [step for _, name, step in kills if name == task.name]
    for number, (start, step) in enumerate(zip(starts[1:], killed_at), 2):
      ready = [int(s) for s in _READY.findall(start)]
      if not ready and number < len(starts):
        continue
      if not ready or ready[0] < step:
        failures.append('%s start %d: session at global step %s, not at or after the %d '
                        'logged when it was killed' % (task.name, number,
                                                       ready[:1] or None, step))
  return failures


FLAGS = flags.FLAGS  # Defined when run as a program (tests import the module).


def _dataset_dir(settings, work_dir):
  """--dataset_dir (checked: one train shard file per worker at least), or digits
  converted into work_dir with a shard per worker."""
  if settings.dataset_dir:
    shards = len(glob.glob(os.path.join(settings.dataset_dir, 'train-*-of-*')))
    if shards < settings.num_workers:
      raise errors.ConfigError(
          '--dataset_dir=%s has %d train shard files, fewer than --num_workers=%d (each '
          'worker reads its own): convert with --num_shards=%d, or leave --dataset_dir out'
          % (settings.dataset_dir, shards, settings.num_workers, settings.num_workers))
    return settings.dataset_dir
  from datasets.conversion.convert_images import convert  # pylint: disable=import-outside-toplevel
  directory = os.path.join(work_dir, 'digits')
  convert('digits', directory, num_shards=max(10, settings.num_workers))
  return directory


def main(argv):
  if reject_positional_arguments(argv):
    return errors.USAGE
  try:
    settings = check_settings(config_from_flags(ChaosSettings, FLAGS))
  except errors.ConfigError as error:
    return errors.report(error)
  work_dir = settings.work_dir or tempfile.mkdtemp(prefix='chaos_')
  try:
    dataset_dir = _dataset_dir(settings, work_dir)
  except errors.ConfigError as error:
    return errors.report(error)
  load = os.getloadavg()
  report = run_chaos(settings, dataset_dir, work_dir)
  print(json.dumps(dict(dataclasses.asdict(report), ok=report.ok, settings=dataclasses.asdict(
      settings), load_average_before=load, load_average_after=os.getloadavg(),
                        date=datetime.date.today().isoformat(), cores=os.cpu_count())))
  print('chaos: %s in %.0f s, %d kills (%d of the chief), %d updates recorded, %d steps '
        'skipped%s' % ('PASS' if report.ok else 'FAIL', report.seconds, len(report.kills),
                       sum(1 for k in report.kills if k[1] == 'worker-0'), report.updates,
                       report.skipped_steps,
                       ''.join('\n  failed: %s' % f for f in report.failures)))
  return errors.OK if report.ok else errors.BUG


if __name__ == '__main__':
  define_flags(ChaosSettings)
  app.run(main, flags_parser=parse_flags)
