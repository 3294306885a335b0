"""configs/slurm/train.sbatch stopped and started again on a real one-node Slurm
(tests/slurm_cluster.py, shared with tests/configs/test_slurm_recipe.py): SIGUSR1 to the
batch shell (what the time limit's warning and a preemption send) requeues the job until
--max_requeues, then one line (a stand-in trainer: no TensorFlow); a task's 138 requeues
the job within --max_requeues, a 2 never, even where srun's status (the highest) reads 138
(stand-in trainers); and one job history with the real trainer, 1 ps + 2 synchronous
workers: `scancel` mid-run, every task gets SIGTERM, the chief saves, all end on their own
with status 0 within KillWait; the same sbatch again resumes at the saved step, is
preempted by a job of the `urgent` partition, saves, requeues itself, resumes and ends
with the weights of ONE worker of the global batch trained straight through
(--random_seed, --deterministic; tests/global_batch.py).
"""

import re
import subprocess
import time

import numpy as np
import pytest

from deployment import sync_replicas
from tests import slurm_cluster
from tests.cluster_tasks import (assert_clean_log, checkpoint_steps, last_start, ready_steps,
                                 steps, train_flags, wait_for, WAIT_SECS)
from tests.global_batch import (MODEL_VARIABLES, PER_WORKER_BATCH, assert_equivalent,
                                checkpoint_values, write_aligned_dataset)
from tests.slurm_recipe_jobs import (LEAVE, jobcomp, job_id, logs, sbatch, stand_in,
                                     task_runs)
from training.config import TrainConfig
from training.train import SYNC_TRACE_FILE, train

# 4 s at 120 steps/s here: the scancel and the preemption land mid-run, each a few tens of
# steps after the chief's logged step the test waits for (seen under the suite's load: 30
# after step 10, 40 after the step saved on scancel + 10). Every step past them is CPU
# of three TensorFlow processes and of the straight reference run.
REQUEUE_STEPS = 500
SEED = 7


@pytest.fixture(scope='session')
def slurm(request, tmp_path_factory):
  return slurm_cluster.shared(request, tmp_path_factory)


# Stands in for the trainer in every task (no TensorFlow): ready, then at SIGTERM the line
# the chief writes when it stops, which the recipe reads. (A foreground sleep: scancel
# signals every process of the step, and a `wait` for a sleep that died first would end
# the script before its trap.)
STAND_IN = r'''#!/bin/bash
trap 'echo "Training stopped at step 3; wrote x"; exit 0' TERM
echo "stand-in trainer ready: task $SLURM_PROCID"
while :; do sleep 0.2; done
'''


def _wait_for_run(log_dir, job, run, ready):
  """Until every task log holds `run` starts, the last one past `ready` (a regex)."""
  def started():
    texts = logs(log_dir)
    return len(texts) == 3 and all(len(task_runs(t)) == run and re.search(ready, last_start(t))
                                   for t in texts.values())
  wait_for(started, 'run %d of Slurm job %s to start' % (run, job), timeout=2 * WAIT_SECS)


@pytest.mark.slow
@pytest.mark.cluster
def test_the_time_limits_signal_requeues_the_job_until_max_requeues(slurm, tmp_path):
  """SIGUSR1 to the batch shell, what `--signal=B:USR1@120` sends before the time limit
  (by hand here: Slurm sends a time limit's at a minute's resolution), stops the tasks and
  requeues the job: the same id, output and logs appended. The second run's meets
  --max_requeues=1: one line, no requeue, the job COMPLETED."""
  log_dir = tmp_path / 'logs'
  began = time.time()
  job = job_id(sbatch(slurm, log_dir, [], '--parsable', script_args=('1', '--max_requeues=1'),
                      python=stand_in(tmp_path, STAND_IN)))
  for run in (1, 2):
    _wait_for_run(log_dir, job, run, 'stand-in trainer ready')
    subprocess.run(['scancel', '--batch', '--signal=USR1', job], env=slurm.env, check=True)
  fields = slurm.wait_for_end(job, timeout=60)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('two runs and a requeue: %.0f s; %s' % (time.time() - began, jobcomp(fields)))
  assert [line['JobState'] for line in slurm.history(job)] == ['PENDING', 'COMPLETED'], batch
  assert fields['ExitCode'] == '0:0', fields
  assert batch.count('SIGUSR1 (time limit or preemption)') == 2, batch
  assert batch.count('srun exited with status 0') == 2, batch
  assert 'requeued (1 of --max_requeues=1) after Training stopped at step 3: ' in batch, batch
  assert 'run 2, requeued 1 times' in batch, batch
  stop, = [line for line in batch.splitlines() if 'not requeued' in line]
  assert stop.endswith('not requeued: requeued 1 times already (--max_requeues=1); Training '
                       'stopped at step 3; sbatch the same command to go on'), batch
  for name, text in logs(log_dir).items():
    assert task_runs(text) == [(job, '1'), (job, '2')], (name, text)


def _seeded_reference(tmp_path):
  """The aligned data, a start checkpoint and ONE worker of the global batch trained
  straight to REQUEUE_STEPS from it, seeded and deterministic; returns (the cluster's
  flags, the straight run's checkpoint, the start)."""
  data = write_aligned_dataset(tmp_path / 'data', PER_WORKER_BATCH)
  common = dict(dataset_name='image_folder', dataset_dir=data,
                model_name='softmax_regression', optimizer='sgd', learning_rate=0.1,
                learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
                log_every_n_steps=10, save_interval_secs=600, save_summaries_secs=600,
                random_seed=SEED, deterministic=True)
  start = train(TrainConfig(train_dir=str(tmp_path / 'start'), max_number_of_steps=1,
                            batch_size=2 * PER_WORKER_BATCH, **common)).checkpoint
  straight = train(TrainConfig(train_dir=str(tmp_path / 'straight'), checkpoint_path=start,
                               max_number_of_steps=REQUEUE_STEPS,
                               batch_size=2 * PER_WORKER_BATCH, **common)).checkpoint
  common.pop('dataset_dir')
  flags = train_flags(data, tmp_path / 'train', batch_size=PER_WORKER_BATCH,
                      sync_replicas=True, replicas_to_aggregate=2, sync_trace=True,
                      max_number_of_steps=REQUEUE_STEPS, checkpoint_path=start, **common)
  return flags, straight, start


def _difference(checkpoint, reference, start):
  """{variable: (largest absolute difference, L2 difference / L2 movement of the
  reference from start)}."""
  ours, theirs, initial = (checkpoint_values(p) for p in (checkpoint, reference, start))
  return {name: (float(np.max(np.abs(ours[name] - theirs[name]))),
                 float(np.linalg.norm(ours[name] - theirs[name]) /
                       np.linalg.norm(theirs[name] - initial[name])))
          for name in MODEL_VARIABLES}


def _submit_and_cancel(slurm, log_dir, flags, train_dir):
  """sbatch, scancel once the chief logged step 10; returns the step it saved."""
  job = job_id(sbatch(slurm, log_dir, flags, '--parsable'))   # Returns at once.
  _wait_for_step(log_dir, job, 10)
  subprocess.run(['scancel', job], env=slurm.env, check=True)
  fields = slurm.wait_for_end(job, timeout=60)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('scancel: %s' % jobcomp(fields))
  assert fields['JobState'] == 'CANCELLED', fields
  # Every task ended on its own, within KillWait, with status 0 (srun's is the highest).
  assert 'srun exited with status 0' in batch and 'Killed' not in batch, batch
  texts = logs(log_dir)
  for name, text in texts.items():
    assert_clean_log(text, name)
    assert 'SIGTERM received' in text, (name, text[-2000:])
  saved = checkpoint_steps(train_dir)[-1]
  assert ready_steps(texts['worker-0.log']) == [0], texts['worker-0.log'][-2000:]
  assert LEAVE.findall(texts['worker-0.log']) == [('stopped', str(saved))]  # It saved.
  assert max(steps(texts['worker-0.log'])) <= saved < REQUEUE_STEPS
  return saved


def _wait_for_step(log_dir, job, step):
  chief = log_dir / 'worker-0.log'
  wait_for(lambda: chief.exists() and max(steps(chief.read_text()) or [0]) >= step,
           'the chief to log step %d in Slurm job %s' % (step, job), timeout=2 * WAIT_SECS)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_cancelled_job_resumes_and_a_preempted_one_requeues_itself_to_a_straight_runs_end(
    slurm, tmp_path):
  """1 ps + 2 synchronous workers. `scancel` after step 10: every task gets SIGTERM, the
  chief saves, all end on their own with status 0. The same sbatch again resumes at the
  saved step; 10 steps on, a job of the `urgent` partition preempts it (the batch shell's
  SIGUSR1: preempt_send_user_signal), the chief saves, the job requeues itself, resumes
  at that step and ends with the weights of one worker of the global batch trained
  straight through (within 1e-5 of its movement)."""
  flags, straight, start = _seeded_reference(tmp_path)
  train_dir, log_dir = tmp_path / 'train', tmp_path / 'logs'
  began = time.time()
  cancelled = _submit_and_cancel(slurm, tmp_path / 'cancelled_logs', flags, train_dir)
  job = job_id(sbatch(slurm, log_dir, flags, '--parsable'))
  _wait_for_step(log_dir, job, cancelled + 10)
  urgent = job_id(subprocess.run(
      ['sbatch', '--parsable', '--partition=urgent', '--ntasks=16', '--wrap=true',
       '--output=%s/urgent-%%j.out' % log_dir], env=slurm.env, capture_output=True,
      text=True, check=True))
  fields = slurm.wait_for_end(job, timeout=2 * WAIT_SECS)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('cancelled at step %d, then resumed, preempted, requeued and finished: %.0f s; %s'
        % (cancelled, time.time() - began, jobcomp(fields)))
  assert [line['JobState'] for line in slurm.history(job)] == ['PENDING', 'COMPLETED'], batch
  assert fields['ExitCode'] == '0:0' and slurm.job(urgent)['JobState'] == 'COMPLETED'
  assert 'SIGUSR1 (time limit or preemption)' in batch, batch
  saved = int(re.search(r'requeued \(1 of --max_requeues=10\) after Training stopped at '
                        r'step (\d+)', batch).group(1))
  assert cancelled < saved < REQUEUE_STEPS and checkpoint_steps(train_dir)[-1] == REQUEUE_STEPS
  texts = logs(log_dir)
  assert sorted(texts) == ['ps-0.log', 'worker-0.log', 'worker-1.log']
  for name, text in texts.items():
    assert task_runs(text) == [(job, '1'), (job, '2')], (name, text[-2000:])
    assert_clean_log(text, name)
    assert 'from Slurm job %s' % job in last_start(text), text[-2000:]
    assert 'SIGTERM received' in text.split('=== ')[1], (name, text[-2000:])
  # The same sbatch resumed at the step saved on scancel; its requeued run at the one
  # saved on preemption.
  assert ready_steps(texts['worker-0.log']) == [cancelled, saved], texts['worker-0.log'][-2000:]
  assert min(ready_steps(texts['worker-1.log'])) >= cancelled
  assert min(ready_steps(last_start(texts['worker-1.log']))) >= saved
  assert LEAVE.findall(texts['worker-0.log']) == [('stopped', str(saved)),
                                                  ('finished', str(REQUEUE_STEPS))]
  assert LEAVE.findall(last_start(texts['worker-1.log'])) == [('finished', str(REQUEUE_STEPS))]
  assert 'All 2 workers left: parameter server 0 exits' in last_start(texts['ps-0.log'])
  # The chiefs' record (every incarnation appends): each update took one gradient per
  # worker at its step, and the steps ran 0..REQUEUE_STEPS-1 once each: none went back.
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(REQUEUE_STEPS)], trace
  final = str(train_dir / ('model.ckpt-%d' % REQUEUE_STEPS))
  difference = _difference(final, straight, start)
  print('cancelled at step %d, requeued at step %d; against the straight run, per variable '
        '(largest absolute difference, L2 difference / L2 movement): %s'
        % (cancelled, saved, difference))
  for name, (_, of_movement) in difference.items():
    assert of_movement <= 1e-5, (name, difference)
  assert_equivalent(final, straight, start)   # And as one vector; every variable moved.


# Stands in for every task: in run 1 task 1 exits FIRST (138: it lost its cluster) and
# task 0, once srun ends the step (--kill-on-bad-exit's SIGTERM), exits ON_TERM; a
# requeued run (SLURM_RESTART_COUNT >= 1) finishes at once.
FAILING_STAND_IN = r'''#!/bin/bash
echo "stand-in trainer: task $SLURM_PROCID, run $(( ${SLURM_RESTART_COUNT:-0} + 1 ))"
if (( ${SLURM_RESTART_COUNT:-0} >= 1 )); then echo "Training finished at step 5"; exit 0; fi
if (( SLURM_PROCID == 1 )); then sleep 1; echo "error: stand-in: status %(first)d"; exit %(first)d; fi
trap 'exit %(on_term)d' TERM
while :; do sleep 0.2; done
'''


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize('first, on_term, max_requeues, ends', [
    (138, 0, 1, ('COMPLETED', '0:0', 2)),    # A cluster failure: requeued, run 2 finishes.
    (138, 0, 0, ('FAILED', '138:0', 1)),     # Past --max_requeues: one line, no requeue.
    (2, 138, 1, ('FAILED', '2:0', 1)),       # srun says 138 (the highest); the 2 is permanent.
], ids=['138_requeued', '138_past_max_requeues', '2_never'])
def test_a_tasks_138_requeues_the_job_and_other_statuses_do_not(slurm, tmp_path, first,
                                                                 on_term, max_requeues, ends):
  """`train.sbatch 0` of 2 tasks, one exiting `first` in run 1, the other `on_term` when
  srun ends the step (--kill-on-bad-exit): only 138s are a cluster failure, requeued within
  --max_requeues (the job's same id, a second run that finishes: COMPLETED); past the
  budget one line and FAILED 138; a 2 ends the job FAILED 2 even though srun's status,
  the highest of the tasks', is the other's 138."""
  log_dir = tmp_path / 'logs'
  began = time.time()
  job = job_id(sbatch(slurm, log_dir, [], '--parsable', ntasks=2,
                      script_args=('0', '--max_requeues=%d' % max_requeues),
                      python=stand_in(tmp_path, FAILING_STAND_IN % dict(first=first,
                                                                        on_term=on_term))))
  fields = slurm.wait_for_end(job, timeout=2 * WAIT_SECS)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('%d then %d on SIGTERM, --max_requeues=%d: %.0f s; %s' % (
      first, on_term, max_requeues, time.time() - began, jobcomp(fields)))
  state, exit_code, runs = ends
  history = [line['JobState'] for line in slurm.history(job)]
  assert history == ['PENDING'] * (runs - 1) + [state], batch
  assert fields['ExitCode'] == exit_code, (fields, batch)
  assert re.search(r'task 1: Exited with exit code %d' % first, batch), batch
  assert 'srun exited with status 138' in batch, batch   # 138 in all three: the highest.
  texts = logs(log_dir)
  for name, text in texts.items():
    assert task_runs(text) == [(job, str(run)) for run in range(1, runs + 1)], (name, text)
  lines = [line for line in batch.splitlines() if 'requeued' in line]
  if (first, max_requeues) == (138, 1):
    assert lines[0].endswith('requeued (1 of --max_requeues=1) after a cluster failure '
                             '(status 138; the tasks\' error lines name the lost task): '
                             'Slurm starts the job again, which resumes from the train_dir')
    assert lines[1:] == [l for l in lines if 'run 2, requeued 1 times' in l], batch
    assert 'Training finished at step 5' in texts['worker-0.log']
  elif first == 138:
    stop, = lines
    assert stop.endswith('not requeued: requeued 0 times already (--max_requeues=0); a '
                         'cluster failure (status 138; the tasks\' error lines name the '
                         'lost task); sbatch the same command to go on'), batch
  else:
    stop, = lines
    assert stop.endswith('not requeued: a task exited with status 2, which running again '
                         'cannot mend (docs/exit-status.md; its error line is in its log)')
