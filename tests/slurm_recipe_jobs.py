"""configs/slurm/train.sbatch submitted to the tests' one-node Slurm (tests/slurm_cluster.py),
and what its jobs leave: the batch script's output, one log per task (a header per start of
the task), the jobcomp log's lines (no slurmdbd, so no sacct)."""

import glob
import os
import re
import subprocess
import sys

from tests.cluster_tasks import ROOT, error_lines, WAIT_SECS

RECIPE = os.path.join(ROOT, 'configs', 'slurm', 'train.sbatch')
LEAVE = re.compile(r'Worker \d+ leaves: (\w+) at global step (\d+)')


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


def stand_in(tmp_path, script):
  """An executable file holding `script`, the trainer's stand-in (the recipe's $PYTHON)."""
  path = tmp_path / 'trainer'
  path.write_text(script)
  path.chmod(0o755)
  return path


def logs(log_dir):
  return {os.path.basename(p): open(p, errors='replace').read()
          for p in glob.glob(os.path.join(str(log_dir), '*.log'))}


def why(batch, log_dir):
  """A failed job's story, its cause first: every task's `error:` lines, the batch
  script's output, then each task log's last lines (a CI excerpt keeps only the top)."""
  texts = logs(log_dir)
  causes = ['%s: %s' % (name, line) for name, text in sorted(texts.items())
            for line in error_lines(text)]
  tails = ['--- %s\n%s' % (name, '\n'.join(text.splitlines()[-12:]))
           for name, text in sorted(texts.items())]
  return '\n'.join(causes + [batch] + tails)


def jobcomp(fields):
  return ' '.join('%s=%s' % (k, fields[k]) for k in ('JobId', 'JobState', 'ExitCode',
                                                     'StartTime', 'EndTime', 'ProcCnt'))


def job_id(result):
  found = re.search(r'(\d+)', result.stdout)
  assert found, result.stdout + result.stderr
  return found.group(1)


def task_runs(text):
  """[(job id, run)] of a task log's headers: one per start of the task."""
  return re.findall(r'=== Slurm job (\d+), run (\d+)', text)
