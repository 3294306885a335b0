"""configs/slurm/train.sbatch: its header and checks, and its jobs on a real one-node Slurm
(tests/slurm_cluster.py: Debian's slurmctld, slurmd and munge, started once per pytest
process and stopped at the session's end; tests/slurm_recipe_jobs.py submits and reads).

The header names the command, what to expect and the ports to firewall; the flags the
script adds are the trainer's and the data service's; P and its options are checked
before anything runs. Without parameter servers (`train.sbatch 0`) every task is a worker
(a stand-in trainer), and 2 workers x 2 clones all-reducing equal ONE process of the
global batch within 1e-5 (tests/global_batch.py), every task 0, `sbatch --wait` 0 and the
job COMPLETED. With --data_workers=1 the script starts a tf.data service beside the
cluster, the trainer reads from it, and the script ends it with no process left. Stops,
resumes and requeues: tests/configs/test_slurm_requeue.py. The jobs' ends are read from
the jobcomp log (no slurmdbd, so no sacct). Without root or apt-get the Slurm tests skip,
with the reason.
"""

import dataclasses
import glob
import os
import re
import subprocess
import time

import pytest

from deployment.cluster.slurm_env import JOB_SLOTS, PORT_BASE, SLOT_PORTS
from training.config import TrainConfig
from datasets.inputs.data_service import ServerConfig
from tests import slurm_cluster
from tests.cluster_tasks import assert_clean_log, checkpoint_steps, train_flags
from tests.global_batch import PER_WORKER_BATCH, STEPS, assert_equivalent
from tests.launch_local_runs import shared_sync_reference
from tests.slurm_recipe_jobs import (LEAVE, RECIPE, jobcomp, job_id, logs, sbatch, stand_in,
                                     why)


@pytest.fixture(scope='session')
def slurm(request, tmp_path_factory):
  return slurm_cluster.shared(request, tmp_path_factory)


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
  log_dir = tmp_path / 'logs'
  result = sbatch(slurm, log_dir, ['--variable_update=replicated'], '--wait', ntasks=2,
                  script_args=('0',), python=stand_in(tmp_path, ECHO_TRAINER))
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


@pytest.mark.slow
@pytest.mark.cluster
def test_two_workers_of_two_clones_without_ps_train_like_one_worker_of_the_global_batch(
    slurm, tmp_path, tmp_path_factory):
  """All-reduce under Slurm: `train.sbatch 0` of 2 tasks, each worker 2 clones of batch
  b/2 (--variable_update=replicated, no ps): worker k's clones read shard k's b examples
  per step, all 4 clones' gradients averaged, against the same ONE process of batch 2b."""
  train_dir, log_dir = tmp_path / 'cluster', tmp_path / 'logs'
  flags, reference, start = shared_sync_reference(tmp_path_factory, train_dir)
  flags = [flag for flag in flags if not flag.startswith(('--sync_replicas', '--replicas_to',
                                                          '--sync_trace', '--batch_size'))]
  flags += ['--batch_size=%d' % (PER_WORKER_BATCH // 2), '--num_clones=2', '--clone_on_cpu',
            '--variable_update=replicated']
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait', ntasks=2, script_args=('0',))
  job = job_id(result)
  fields = slurm.wait_for_end(job, timeout=10)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('sbatch --wait: %.0f s, status %d; %s' % (time.time() - began, result.returncode,
                                                 jobcomp(fields)))
  assert result.returncode == 0, why(batch, log_dir)
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
  # Softmax regression, not train_flags' LeNet: the service beside the cluster is the point.
  flags = train_flags(digits_dir, train_dir, max_number_of_steps=20,
                      model_name='softmax_regression')
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait', ntasks=4,
                  script_args=('1', '--data_workers=1'))
  job = job_id(result)
  fields = slurm.wait_for_end(job, timeout=10)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  texts = logs(log_dir)
  print('sbatch --wait: %.0f s, status %d; %s' % (time.time() - began, result.returncode,
                                                 jobcomp(fields)))
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
