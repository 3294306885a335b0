"""configs/slurm/train.sbatch submitted to a real one-node Slurm (tests/slurm_cluster.py:
Debian's slurmctld, slurmd and munge, started once for the session and stopped at its end).

1 ps + 2 synchronous workers in one srun step, the cluster read from srun's environment
(--addressing=slurm). `scancel` mid-run: every task gets SIGTERM, the chief saves, all
end on their own with status 0 within KillWait. The same sbatch again (`--wait`) resumes
at the saved step, never lower, and ends 0: the job COMPLETED, every task's log clean,
the checkpoint at the last step, each update of both chiefs' records one gradient per
worker at its step, and the parameters equal ONE worker of the global batch trained
without a stop (tests/deployment/test_launch_local.py's reference and 1e-5 bound).
Without root or apt-get the Slurm tests skip, with the reason.
"""

import glob
import os
import re
import subprocess
import sys
import time

import pytest

from deployment import sync_replicas
from training.train import SYNC_TRACE_FILE
from tests import slurm_cluster
from tests.cluster_tasks import (ROOT, assert_clean_log, checkpoint_steps, ready_steps,
                                 steps, wait_for, WAIT_SECS)
from tests.deployment.test_launch_local import assert_equivalent, sync_reference

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
RECIPE = os.path.join(ROOT, 'configs', 'slurm', 'train.sbatch')
LEAVE = re.compile(r'Worker \d+ leaves: (\w+) at global step (\d+)')
LAST_STEP = 400   # Far enough that the scancel lands mid-run on a fast machine too.


@pytest.fixture(scope='session')
def slurm(tmp_path_factory):
  reason = slurm_cluster.install()
  if reason:
    pytest.skip(reason)
  with slurm_cluster.SlurmCluster(tmp_path_factory.mktemp('slurm')) as cluster:
    yield cluster


def sbatch(slurm, log_dir, flags, *options):
  """Runs `sbatch [options] train.sbatch 1 flags` (1 ps + 2 workers) from the repository
  root, the trainer on this Python; returns the CompletedProcess."""
  os.makedirs(log_dir, exist_ok=True)   # Slurm opens --output there before the script runs.
  env = dict(slurm.env, PYTHON=sys.executable, LOG_DIR=str(log_dir))
  env.pop('TF_CONFIG', None)
  command = (['sbatch', '--ntasks=3', '--output=%s/batch-%%j.out' % log_dir] + list(options)
             + [RECIPE, '1'] + list(flags))
  return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=2 * WAIT_SECS)


def logs(log_dir):
  return {os.path.basename(p): open(p, errors='replace').read()
          for p in glob.glob(os.path.join(str(log_dir), '*.log'))}


def job_id(result):
  found = re.search(r'(\d+)', result.stdout)
  assert found, result.stdout + result.stderr
  return found.group(1)


def test_scancel_saves_and_the_same_sbatch_resumes_to_one_worker_of_the_global_batch(
    slurm, tmp_path):
  """One scenario for both claims (each job start costs TensorFlow's import in 3 tasks)."""
  flags, reference, start = sync_reference(tmp_path, LAST_STEP)
  train_dir = tmp_path / 'cluster'
  saved = _submit_and_cancel(slurm, tmp_path / 'logs1', flags, train_dir)
  log_dir = tmp_path / 'logs2'
  began = time.time()
  result = sbatch(slurm, log_dir, flags, '--wait')
  job = job_id(result)
  fields = slurm.job(job)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('resubmitted (saved at step %d): sbatch --wait %.0f s, status %d; scontrol: '
        'JobState=%s ExitCode=%s RunTime=%s; jobcomp: %s'
        % (saved, time.time() - began, result.returncode, fields['JobState'],
           fields['ExitCode'], fields['RunTime'], slurm.jobcomp_lines(job)))
  assert result.returncode == 0, batch + str(logs(log_dir))[-3000:]
  assert (fields['JobState'], fields['ExitCode']) == ('COMPLETED', '0:0'), fields
  assert 'srun exited with status 0' in batch, batch   # srun: the highest task status.
  texts = logs(log_dir)
  assert sorted(texts) == ['ps-0.log', 'worker-0.log', 'worker-1.log']
  for name, text in texts.items():
    assert_clean_log(text, name)
    assert 'from Slurm job %s' % job in text, text[-2000:]
  assert 'All 2 workers left: parameter server 0 exits' in texts['ps-0.log']
  assert ready_steps(texts['worker-0.log']) == [saved], texts['worker-0.log'][-2000:]
  assert min(ready_steps(texts['worker-1.log'])) >= saved
  for name in ('worker-0.log', 'worker-1.log'):
    assert LEAVE.findall(texts[name]) == [('finished', str(LAST_STEP))], texts[name][-2000:]
  assert checkpoint_steps(train_dir)[-1] == LAST_STEP
  # Both chiefs' records: every update took one gradient per worker at its step, and
  # the steps run 0..LAST_STEP-1 once each (none repeated, none skipped: never back).
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(LAST_STEP)], trace
  difference = assert_equivalent(str(train_dir / ('model.ckpt-%d' % LAST_STEP)), reference,
                                 start)
  print('largest absolute difference from one worker of the global batch: %.3g' % difference)


def _submit_and_cancel(slurm, log_dir, flags, train_dir):
  """sbatch, scancel once the chief logged step 10; returns the step it saved."""
  job = job_id(sbatch(slurm, log_dir, flags, '--parsable'))   # Returns at once.
  chief = log_dir / 'worker-0.log'
  wait_for(lambda: chief.exists() and max(steps(chief.read_text()) or [0]) >= 10,
           'the chief to log step 10 in Slurm job %s' % job, timeout=2 * WAIT_SECS)
  subprocess.run(['scancel', job], env=slurm.env, check=True)
  fields = slurm.wait_for_end(job, timeout=60)
  batch = (log_dir / ('batch-%s.out' % job)).read_text()
  print('scancel: JobState=%s ExitCode=%s; jobcomp: %s'
        % (fields['JobState'], fields['ExitCode'], slurm.jobcomp_lines(job)))
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
