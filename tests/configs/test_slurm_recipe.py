"""configs/slurm/train.sbatch submitted to a real one-node Slurm (tests/slurm_cluster.py:
Debian's slurmctld, slurmd and munge, started once for the session and stopped at its end).

1 ps + 2 synchronous workers in one srun step, the cluster read from srun's environment
(--addressing=slurm). `sbatch --wait` ends 0, the job COMPLETED, every task's log clean,
the checkpoint at the last step, each update one gradient per worker at its step, and the
parameters equal ONE worker of the global batch (tests/deployment/test_launch_local.py's
reference and bound, 1e-4 of the run's movement). `scancel` mid-run: every task gets
SIGTERM, the chief saves, all end on their own with status 0 within KillWait; the same
sbatch again resumes at the saved step, never lower, and ends like the first. A job
preempted by one of the `urgent` partition (what the time limit's warning does too: the
script's SIGUSR1) saves, requeues itself, resumes and ends with the weights of one worker
of the global batch trained straight through (--random_seed, --deterministic); the
requeues stop at --max_requeues with one line (a stand-in trainer: no TensorFlow).
Without parameter servers (`train.sbatch 0`, all-reduce): 2 workers x 2 clones equal ONE
process of the global batch within 1e-5, every task 0; a task's 138 requeues the job
within --max_requeues, a 2 never, even where srun's status (the highest) reads 138
(stand-in trainers). The jobs' ends are read from the jobcomp log (no slurmdbd, so no
sacct). Without root or apt-get the Slurm tests skip, with the reason.
"""

import dataclasses
import glob
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from deployment import sync_replicas
from deployment.cluster.slurm_env import JOB_SLOTS, PORT_BASE, SLOT_PORTS
from training.config import TrainConfig
from training.train import SYNC_TRACE_FILE
from datasets.inputs.data_service import ServerConfig
from tests import slurm_cluster
from tests.cluster_tasks import (ROOT, assert_clean_log, checkpoint_steps, error_lines,
                                 last_start, ready_steps, steps, train_flags, wait_for,
                                 WAIT_SECS)
from tests.deployment.test_launch_local import (assert_equivalent, checkpoint_values,
                                                MODEL_VARIABLES, PER_WORKER_BATCH, STEPS,
                                                sync_reference, write_aligned_dataset)
from training.train import train

RECIPE = os.path.join(ROOT, 'configs', 'slurm', 'train.sbatch')
LEAVE = re.compile(r'Worker \d+ leaves: (\w+) at global step (\d+)')
LAST_STEP = 400   # Far enough that the scancel lands mid-run on a fast machine too.
# (Not compared with one worker: over 400 steps round-off alone moves the near-zero
# biases 1.4e-5 relative, past the 5-step test's bound.)


@pytest.fixture(scope='session')
def slurm(tmp_path_factory):
  reason = slurm_cluster.install()
  if reason:
    pytest.skip(reason)
  with slurm_cluster.SlurmCluster(tmp_path_factory.mktemp('slurm')) as cluster:
    yield cluster


def sbatch(slurm, log_dir, flags, *options, ntasks=3, script_args=('1',),
           python=sys.executable):
  """Runs `sbatch [options] train.sbatch 1 flags` (1 ps + 2 workers) from the repository
  root, the trainer on `python`; returns the CompletedProcess."""
  os.makedirs(log_dir, exist_ok=True)   # Slurm opens --output there before the script runs.
  env = dict(slurm.env, PYTHON=str(python), LOG_DIR=str(log_dir))
  env.pop('TF_CONFIG', None)
  command = (['sbatch', '--ntasks=%d' % ntasks, '--output=%s/batch-%%j.out' % log_dir]
             + list(options) + [RECIPE] + list(script_args) + list(flags))
  return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=2 * WAIT_SECS)


def logs(log_dir):
  return {os.path.basename(p): open(p, errors='replace').read()
          for p in glob.glob(os.path.join(str(log_dir), '*.log'))}


def _why(batch, log_dir):
  """A failed job's story, its cause first: every task's `error:` lines, the batch
  script's output, then each task log's last lines (a CI excerpt keeps only the top)."""
  texts = logs(log_dir)
  causes = ['%s: %s' % (name, line) for name, text in sorted(texts.items())
            for line in error_lines(text)]
  tails = ['--- %s\n%s' % (name, '\n'.join(text.splitlines()[-12:]))
           for name, text in sorted(texts.items())]
  return '\n'.join(causes + [batch] + tails)


def _jobcomp(fields):
  return ' '.join('%s=%s' % (k, fields[k]) for k in ('JobId', 'JobState', 'ExitCode',
                                                     'StartTime', 'EndTime', 'ProcCnt'))


def job_id(result):
  found = re.search(r'(\d+)', result.stdout)
  assert found, result.stdout + result.stderr
  return found.group(1)


def test_the_recipe_opens_with_its_command_what_to_expect_and_the_ports_to_firewall():
  header = ''.join(l for l in open(RECIPE) if l.startswith('# '))
  assert 'sbatch --nodes=10 --ntasks=12' in header and 'configs/slurm/train.sbatch 2' in header
  assert 'Expect:' in header and '20000-59999' in header
  assert '--data_workers=4' in header and 'P + W + 1 + D' in header
  assert '--max_requeues=R' in header and 'one_node_slurm start' in header
  options = [l.split()[1] for l in open(RECIPE) if l.startswith('#SBATCH ')]
  # Requeued by itself: the warning to this shell only, the output appended, requeueable.
  assert {'--signal=B:USR1@120', '--requeue', '--open-mode=append'} <= set(options)
  assert '%d-%d' % (PORT_BASE, PORT_BASE + JOB_SLOTS * SLOT_PORTS - 1) == '20000-59999'


def _step(marker):
  """What the recipe's srun step whose `bash -c` ends with `marker` runs (srun's own
  options left out): the tasks' commands and their arguments."""
  text = open(RECIPE).read()
  start = text.index("bash -c '", text.rindex('srun ', 0, text.index(marker)))
  return text[start:text.index('&\n', text.index(marker))]


def test_the_flags_the_script_adds_are_the_trainers_and_the_data_services(tmp_path):
  service_flag = re.search(r'\n *service=\((--\w+)=', open(RECIPE).read()).group(1)
  added = re.findall(r'(--\w+)=', _step("' slimdeploy-task")) + [service_flag]
  assert set(added) >= {'--addressing', '--num_ps_tasks', '--stop_grace_secs',
                        '--data_service_address'}
  defined = {'--' + f.name for f in dataclasses.fields(TrainConfig)}
  assert set(added) <= defined, set(added) - defined
  added = set(re.findall(r'(--\w+)=', _step("' slimdeploy-service")))
  assert added == {'--addressing', '--work_dir', '--address_file'}
  assert added <= {'--' + f.name for f in dataclasses.fields(ServerConfig)}
  # Without P the script stops before anything runs, saying how to call it.
  result = subprocess.run(['bash', RECIPE], capture_output=True, text=True, cwd=tmp_path)
  assert result.returncode == 2 and result.stderr.startswith('usage: sbatch'), result
  result = subprocess.run(['bash', RECIPE, '1', '--data_workers=two'], capture_output=True,
                          text=True, cwd=tmp_path, env=dict(os.environ, SLURM_NTASKS='4'))
  assert result.returncode == 2 and result.stderr.startswith(
      'error: --data_workers=two must be a count'), result
  result = subprocess.run(['bash', RECIPE, '1', '--max_requeues=-1'], capture_output=True,
                          text=True, cwd=tmp_path, env=dict(os.environ, SLURM_NTASKS='4'))
  assert result.returncode == 2 and result.stderr.startswith(
      'error: --max_requeues=-1 must be a count of requeues'), result
  result = subprocess.run(['bash', RECIPE, '1', '--data_workers=2'], capture_output=True,
                          text=True, cwd=tmp_path, env=dict(os.environ, SLURM_NTASKS='4'))
  assert result.returncode == 2 and result.stderr.startswith(
      'error: --ntasks=4 leaves no worker beside 1 ps and 3 data service'), result


@pytest.mark.slow
@pytest.mark.cluster
def test_sbatch_wait_trains_like_one_worker_of_the_global_batch(slurm, tmp_path):
  flags, reference, start = sync_reference(tmp_path)
  train_dir = tmp_path / 'cluster'
  texts = _run_to_the_end(slurm, tmp_path / 'logs', flags, train_dir, STEPS)
  assert ready_steps(texts['worker-0.log']) == [0]
  largest, of_movement = assert_equivalent(str(train_dir / ('model.ckpt-%d' % STEPS)),
                                           reference, start)
  print('against one worker of the global batch: largest absolute difference %.3g, '
        'L2 difference %.3g of the L2 movement' % (largest, of_movement))


@pytest.mark.slow
@pytest.mark.cluster
def test_two_workers_of_two_clones_without_ps_train_like_one_worker_of_the_global_batch(
    slurm, tmp_path):
  """All-reduce under Slurm: `train.sbatch 0` of 2 tasks, each worker 2 clones of batch
  b/2 (--variable_update=replicated, no ps): worker k's clones read shard k's b examples
  per step, all 4 clones' gradients averaged, against the same ONE process of batch 2b."""
  flags, reference, start = sync_reference(tmp_path)
  flags = [flag for flag in flags if not flag.startswith(('--sync_replicas', '--replicas_to',
                                                          '--sync_trace', '--batch_size'))]
  flags += ['--batch_size=%d' % (PER_WORKER_BATCH // 2), '--num_clones=2', '--clone_on_cpu',
            '--variable_update=replicated']
  train_dir, log_dir = tmp_path / 'cluster', tmp_path / 'logs'
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait', ntasks=2, script_args=('0',))
  job = job_id(result)
  fields = slurm.wait_for_end(job, timeout=10)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('sbatch --wait: %.0f s, status %d; %s' % (time.time() - began, result.returncode,
                                                 _jobcomp(fields)))
  assert result.returncode == 0, _why(batch, log_dir)
  assert (fields['JobState'], fields['ExitCode']) == ('COMPLETED', '0:0'), fields
  assert 'srun exited with status 0' in batch and 'Exited with exit code' not in batch, batch
  texts = logs(log_dir)
  assert sorted(texts) == ['worker-0.log', 'worker-1.log'], sorted(texts)
  for name, text in texts.items():
    assert_clean_log(text, name)
    assert 'from Slurm job %s' % job in text, text[-2000:]
    assert 'gradients all-reduced over 2 clone(s) of 2 worker(s)' in text, text[-2000:]
    assert LEAVE.findall(text) == [('finished', str(STEPS))], text[-2000:]
    assert 'ran on /job:worker/replica:0/task:%s/device:CPU:1' % name[7] in text
  assert 'cluster of 2 workers without ps (all-reduce)' in texts['worker-0.log']
  assert len(glob.glob(str(train_dir / 'events.out.tfevents.*'))) == 1   # The chief's.
  assert checkpoint_steps(train_dir) == [STEPS]
  largest, of_movement = assert_equivalent(str(train_dir / ('model.ckpt-%d' % STEPS)),
                                           reference, start)
  print('2 workers x 2 clones all-reduce under Slurm against one process of the global '
        'batch: largest absolute difference %.3g, L2 difference %.3g of the L2 movement'
        % (largest, of_movement))
  assert largest <= 1e-5


@pytest.mark.slow
@pytest.mark.cluster
def test_scancel_saves_and_the_same_sbatch_resumes(slurm, tmp_path):
  data = write_aligned_dataset(tmp_path / 'data', PER_WORKER_BATCH)
  train_dir = tmp_path / 'train'
  flags = train_flags(data, train_dir, dataset_name='image_folder',
                      model_name='softmax_regression', learning_rate=0.1,
                      batch_size=PER_WORKER_BATCH, sync_replicas=True, replicas_to_aggregate=2,
                      max_number_of_steps=LAST_STEP, log_every_n_steps=10, sync_trace=True)
  saved = _submit_and_cancel(slurm, tmp_path / 'logs1', flags, train_dir)
  texts = _run_to_the_end(slurm, tmp_path / 'logs2', flags, train_dir, LAST_STEP)
  assert ready_steps(texts['worker-0.log']) == [saved], texts['worker-0.log'][-2000:]
  assert min(ready_steps(texts['worker-1.log'])) >= saved
  print('resumed at the step saved on scancel, %d, and ended at %d' % (saved, LAST_STEP))


def _run_to_the_end(slurm, log_dir, flags, train_dir, last_step):
  """`sbatch --wait` until the job ends; checks it ended well; returns the task logs."""
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait')
  job = job_id(result)
  fields = slurm.wait_for_end(job, timeout=10)   # Written as the job ended.
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('sbatch --wait: %.0f s, status %d; %s' % (time.time() - began, result.returncode,
                                                 _jobcomp(fields)))
  assert result.returncode == 0, _why(batch, log_dir)
  assert (fields['JobState'], fields['ExitCode']) == ('COMPLETED', '0:0'), fields
  assert 'srun exited with status 0' in batch, batch   # srun: the highest task status.
  texts = logs(log_dir)
  assert sorted(texts) == ['ps-0.log', 'worker-0.log', 'worker-1.log']
  for name, text in texts.items():
    assert_clean_log(text, name)
    assert 'from Slurm job %s' % job in text, text[-2000:]
  assert 'All 2 workers left: parameter server 0 exits' in texts['ps-0.log']
  for name in ('worker-0.log', 'worker-1.log'):
    assert LEAVE.findall(texts[name]) == [('finished', str(last_step))], texts[name][-2000:]
  assert checkpoint_steps(train_dir)[-1] == last_step
  # The chiefs' record (every incarnation appends): each update took one gradient per
  # worker at its step, and the steps ran 0..last_step-1 once each: none went back.
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(last_step)], trace
  return texts


def _submit_and_cancel(slurm, log_dir, flags, train_dir):
  """sbatch, scancel once the chief logged step 10; returns the step it saved."""
  job = job_id(sbatch(slurm, log_dir, flags, '--parsable'))   # Returns at once.
  chief = log_dir / 'worker-0.log'
  wait_for(lambda: chief.exists() and max(steps(chief.read_text()) or [0]) >= 10,
           'the chief to log step 10 in Slurm job %s' % job, timeout=2 * WAIT_SECS)
  subprocess.run(['scancel', job], env=slurm.env, check=True)
  fields = slurm.wait_for_end(job, timeout=60)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('scancel: %s' % _jobcomp(fields))
  assert fields['JobState'] == 'CANCELLED', fields
  # Every task ended on its own, within KillWait, with status 0 (srun's is the highest).
  assert 'srun exited with status 0' in batch and 'Killed' not in batch, batch
  texts = logs(log_dir)
  for name, text in texts.items():
    assert_clean_log(text, name)
    assert 'SIGTERM received' in text, (name, text[-2000:])
  saved = checkpoint_steps(train_dir)[-1]
  assert LEAVE.findall(texts['worker-0.log']) == [('stopped', str(saved))]  # It saved.
  assert max(steps(texts['worker-0.log'])) <= saved < LAST_STEP
  return saved


def _processes_naming(text):
  """The command lines of this host's processes that contain `text`."""
  found = []
  for path in glob.glob('/proc/[0-9]*/cmdline'):
    try:
      with open(path, 'rb') as handle:
        line = handle.read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
      continue   # Ended meanwhile.
    if text in line:
      found.append(line)
  return found


@pytest.mark.slow
@pytest.mark.cluster
def test_the_script_starts_a_data_service_beside_the_cluster_and_ends_it(slurm, digits_dir,
                                                                         tmp_path):
  """1 ps + 1 worker read their batches from 1 dispatcher + 1 data worker of the job's
  second step (--data_workers=1, 4 tasks); the job ends COMPLETED and so does the service,
  ended by the script with no process left."""
  log_dir, train_dir = tmp_path / 'logs', tmp_path / 'train'
  flags = train_flags(digits_dir, train_dir, max_number_of_steps=20)
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait', ntasks=4,
                  script_args=('1', '--data_workers=1'))
  job = job_id(result)
  fields = slurm.wait_for_end(job, timeout=10)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  texts = logs(log_dir)
  print('sbatch --wait: %.0f s, status %d; %s' % (time.time() - began, result.returncode,
                                                 _jobcomp(fields)))
  assert result.returncode == 0, batch + str(texts)[-3000:]
  assert (fields['JobState'], fields['ExitCode']) == ('COMPLETED', '0:0'), fields
  assert 'srun exited with status 0' in batch, batch
  assert 'data service step ended with status 0' in batch, batch
  assert sorted(texts) == ['data_worker-0.log', 'dispatcher.log', 'ps-0.log', 'worker-0.log']
  address = (log_dir / 'dispatcher.address').read_text().strip()
  assert 'tf.data service: dispatcher at %s, 1 data workers' % address in batch, batch
  worker = re.search(r'data worker ready on port (\d+), registered with (\S+)',
                     texts['data_worker-0.log'])
  assert worker and worker.group(2) == address, texts['data_worker-0.log']
  assert 'Dispatcher: 1 data worker registered' in texts['dispatcher.log']
  reading = 'Input: batches from the tf.data service at %s' % address
  assert reading in texts['worker-0.log'] and worker.group(1) in texts['worker-0.log'].split(
      reading, 1)[1].splitlines()[0], texts['worker-0.log'][-3000:]
  for name in ('dispatcher.log', 'data_worker-0.log'):   # Ended by the script's SIGINT.
    assert re.search(r'Stopping the (dispatcher|worker) \(a signal\)', texts[name]), name
  for name, text in texts.items():
    assert_clean_log(text, name)
  assert LEAVE.findall(texts['worker-0.log']) == [('finished', '20')]
  assert checkpoint_steps(train_dir)[-1] == 20
  assert _processes_naming(str(log_dir)) == []


# ---- Time limits and preemption: the job saves and requeues itself ----------------------

REQUEUE_STEPS = 1000   # 8 s at 120 steps/s here: the preemption (0.9 s) lands mid-run.
SEED = 7
# Stands in for the trainer in every task (no TensorFlow): ready, then at SIGTERM the line
# the chief writes when it stops, which the recipe reads. (A foreground sleep: scancel
# signals every process of the step, and a `wait` for a sleep that died first would end
# the script before its trap.)
STAND_IN = r'''#!/bin/bash
trap 'echo "Training stopped at step 3; wrote x"; exit 0' TERM
echo "stand-in trainer ready: task $SLURM_PROCID"
while :; do sleep 0.2; done
'''


ECHO_TRAINER = r'''#!/bin/bash
echo "stand-in trainer: task $SLURM_PROCID of $SLURM_STEP_NUM_TASKS: $*"
'''


def test_zero_parameter_servers_passes_the_scripts_checks(tmp_path):
  """`train.sbatch 0` (workers only) gets past the argument checks to the next one (the
  repository root: none here); 0 ps still needs a worker."""
  env = dict(os.environ, SLURM_NTASKS='2', SLIMDEPLOY_DIR=str(tmp_path))
  result = subprocess.run(['bash', RECIPE, '0', '--flag'], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
  assert result.returncode == 2 and result.stderr.startswith(
      'error: no train_image_classifier.py in %s' % tmp_path), result
  result = subprocess.run(['bash', RECIPE, '0', '--data_workers=1'], capture_output=True,
                          text=True, cwd=tmp_path, env=env)
  assert result.returncode == 2 and result.stderr.startswith(
      'error: --ntasks=2 leaves no worker beside 0 ps and 2 data service'), result
  for bad in ('00', '-1', 'x'):
    result = subprocess.run(['bash', RECIPE, bad], capture_output=True, text=True,
                            cwd=tmp_path, env=env)
    assert result.returncode == 2 and result.stderr.startswith('usage: sbatch'), bad


@pytest.mark.slow
@pytest.mark.cluster
def test_without_parameter_servers_every_task_is_a_worker(slurm, tmp_path):
  """`sbatch --ntasks=2 train.sbatch 0`: two workers, each told --num_ps_tasks=0 and
  --addressing=slurm, logs worker-0.log and worker-1.log, no ps (a stand-in trainer)."""
  stand_in = tmp_path / 'trainer'
  stand_in.write_text(ECHO_TRAINER)
  stand_in.chmod(0o755)
  log_dir = tmp_path / 'logs'
  result = sbatch(slurm, log_dir, ['--variable_update=replicated'], '--wait', ntasks=2,
                  script_args=('0',), python=stand_in)
  batch = '\n'.join(open(p).read() for p in glob.glob(str(log_dir / 'batch-*.out')))
  assert result.returncode == 0, result.stderr + batch
  assert ': 0 ps + 2 workers + 0 data workers on ' in batch, batch
  texts = logs(log_dir)
  assert sorted(texts) == ['worker-0.log', 'worker-1.log'], texts
  for index in (0, 1):
    line, = [l for l in texts['worker-%d.log' % index].splitlines() if 'stand-in' in l]
    assert line.startswith('stand-in trainer: task %d of 2: ' % index), line
    assert line.endswith('--addressing=slurm --num_ps_tasks=0 --stop_grace_secs=10 '
                         '--variable_update=replicated'), line


def _runs(text):
  """[(job id, run)] of a task log's headers: one per start of the task."""
  return re.findall(r'=== Slurm job (\d+), run (\d+)', text)


def _wait_for_run(log_dir, job, run, ready):
  """Until every task log holds `run` starts, the last one past `ready` (a regex)."""
  def started():
    texts = logs(log_dir)
    return len(texts) == 3 and all(len(_runs(t)) == run and re.search(ready, last_start(t))
                                   for t in texts.values())
  wait_for(started, 'run %d of Slurm job %s to start' % (run, job), timeout=2 * WAIT_SECS)


@pytest.mark.slow
@pytest.mark.cluster
def test_the_time_limits_signal_requeues_the_job_until_max_requeues(slurm, tmp_path):
  """SIGUSR1 to the batch shell, what `--signal=B:USR1@120` sends before the time limit
  (by hand here: Slurm sends a time limit's at a minute's resolution), stops the tasks and
  requeues the job: the same id, output and logs appended. The second run's meets
  --max_requeues=1: one line, no requeue, the job COMPLETED."""
  stand_in = tmp_path / 'trainer'
  stand_in.write_text(STAND_IN)
  stand_in.chmod(0o755)
  log_dir = tmp_path / 'logs'
  began = time.time()
  job = job_id(sbatch(slurm, log_dir, [], '--parsable', script_args=('1', '--max_requeues=1'),
                      python=stand_in))
  for run in (1, 2):
    _wait_for_run(log_dir, job, run, 'stand-in trainer ready')
    subprocess.run(['scancel', '--batch', '--signal=USR1', job], env=slurm.env, check=True)
  fields = slurm.wait_for_end(job, timeout=60)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('two runs and a requeue: %.0f s; %s' % (time.time() - began, _jobcomp(fields)))
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
    assert _runs(text) == [(job, '1'), (job, '2')], (name, text)


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


@pytest.mark.slow
@pytest.mark.cluster
def test_a_preempted_job_saves_requeues_itself_and_ends_like_a_straight_run(slurm, tmp_path):
  """1 ps + 2 synchronous workers, preempted by a job of the `urgent` partition after step
  10: the batch shell's SIGUSR1 (preempt_send_user_signal), the chief saves, the job
  requeues itself, resumes at the saved step and ends with the weights of one worker of
  the global batch trained straight through (within 1e-5 of its movement)."""
  flags, straight, start = _seeded_reference(tmp_path)
  log_dir, train_dir = tmp_path / 'logs', tmp_path / 'train'
  began = time.time()
  job = job_id(sbatch(slurm, log_dir, flags, '--parsable'))
  chief = log_dir / 'worker-0.log'
  wait_for(lambda: chief.exists() and max(steps(chief.read_text()) or [0]) >= 10,
           'the chief to log step 10 in Slurm job %s' % job, timeout=2 * WAIT_SECS)
  urgent = job_id(subprocess.run(
      ['sbatch', '--parsable', '--partition=urgent', '--ntasks=16', '--wrap=true',
       '--output=%s/urgent-%%j.out' % log_dir], env=slurm.env, capture_output=True,
      text=True, check=True))
  fields = slurm.wait_for_end(job, timeout=2 * WAIT_SECS)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('preempted, requeued and finished: %.0f s; %s' % (time.time() - began,
                                                          _jobcomp(fields)))
  assert [line['JobState'] for line in slurm.history(job)] == ['PENDING', 'COMPLETED'], batch
  assert fields['ExitCode'] == '0:0' and slurm.job(urgent)['JobState'] == 'COMPLETED'
  assert 'SIGUSR1 (time limit or preemption)' in batch, batch
  saved = int(re.search(r'requeued \(1 of --max_requeues=10\) after Training stopped at '
                        r'step (\d+)', batch).group(1))
  assert 0 < saved < REQUEUE_STEPS and checkpoint_steps(train_dir)[-1] == REQUEUE_STEPS
  texts = logs(log_dir)
  for name, text in texts.items():
    assert _runs(text) == [(job, '1'), (job, '2')], (name, text[-2000:])
    assert_clean_log(text, name)
    assert 'SIGTERM received' in text.split('=== ')[1], (name, text[-2000:])
  assert ready_steps(texts['worker-0.log']) == [0, saved], texts['worker-0.log'][-2000:]
  assert LEAVE.findall(texts['worker-0.log']) == [('stopped', str(saved)),
                                                  ('finished', str(REQUEUE_STEPS))]
  assert min(ready_steps(last_start(texts['worker-1.log']))) >= saved
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(REQUEUE_STEPS)], trace
  difference = _difference(str(train_dir / ('model.ckpt-%d' % REQUEUE_STEPS)), straight, start)
  print('requeued at step %d; against the straight run, per variable (largest absolute '
        'difference, L2 difference / L2 movement): %s' % (saved, difference))
  for name, (_, of_movement) in difference.items():
    assert of_movement <= 1e-5, (name, difference)


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
  stand_in = tmp_path / 'trainer'
  stand_in.write_text(FAILING_STAND_IN % dict(first=first, on_term=on_term))
  stand_in.chmod(0o755)
  log_dir = tmp_path / 'logs'
  began = time.time()
  job = job_id(sbatch(slurm, log_dir, [], '--parsable', ntasks=2,
                      script_args=('0', '--max_requeues=%d' % max_requeues), python=stand_in))
  fields = slurm.wait_for_end(job, timeout=2 * WAIT_SECS)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('%d then %d on SIGTERM, --max_requeues=%d: %.0f s; %s' % (
      first, on_term, max_requeues, time.time() - began, _jobcomp(fields)))
  state, exit_code, runs = ends
  history = [line['JobState'] for line in slurm.history(job)]
  assert history == ['PENDING'] * (runs - 1) + [state], batch
  assert fields['ExitCode'] == exit_code, (fields, batch)
  assert re.search(r'task 1: Exited with exit code %d' % first, batch), batch
  assert 'srun exited with status 138' in batch, batch   # 138 in all three: the highest.
  texts = logs(log_dir)
  for name, text in texts.items():
    assert _runs(text) == [(job, str(run)) for run in range(1, runs + 1)], (name, text)
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
