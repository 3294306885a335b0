"""`python -m training.check_cluster` with the trainer's flags: a good 2-worker cluster on
digits passes with an `ok:` line per check (exit 0); a taken port and more workers than
shard files are each one `error:` line naming them (exit 2); the trainer's own refusal of
--replicas_to_aggregate above the workers is found before launch, for a cluster of host
flags and for a Slurm job from its submitting host. And a trainer task whose port is
taken exits 2 with exactly one error line, before TensorFlow's server starts.

The taken port is the tool's contract test, one real process; the other checks call what
its main calls (training.preflight_checks.check_before_launch), and the trainer task is
train_image_classifier.py's main (tests/entries.py), in this process."""

import os
import subprocess
import sys

import pytest

from core.params import config_from_argv
from deployment.cluster.preflight import PlannedJob
from tests.cluster_tasks import ROOT, error_lines, free_ports, train_flags
from tests.entries import train_main
from training.config import TrainConfig
from training.preflight_checks import check_before_launch

DIGITS_TRAIN_SHARDS = 4   # datasets/conversion/convert_images.py writes digits so.


def run(argv, timeout=300):
  env = {k: v for k, v in os.environ.items() if k not in ('TF_CONFIG', 'PYTHONWARNINGS')}
  env['PYTHONPATH'] = ROOT
  return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=timeout)


def cluster_flags(digits_dir, train_dir, worker_ports):
  """The trainer's flags for 1 ps (on a free port) + workers at `worker_ports`."""
  hosts = ['127.0.0.1:%d' % port for port in free_ports(1) + list(worker_ports)]
  return train_flags(digits_dir, train_dir) + [
      '--ps_hosts=%s' % hosts[0], '--worker_hosts=%s' % ','.join(hosts[1:])]


def check(flags, planned=None):
  """What the tool's main checks, in this process: [(passed, line)], each line printed
  as `ok: line` or `error: line` (the exit status 0 when every one passed, else 2; its
  contract test below is the one real `python -m training.check_cluster`). No TF_CONFIG:
  run() leaves it out of the tool's environment too."""
  config, _ = config_from_argv(TrainConfig, [str(flag) for flag in flags])
  return check_before_launch(config, {}, planned)


def passed_lines(results):
  return [line for passed, line in results if passed]


def failed_lines(results):
  return [line for passed, line in results if not passed]


@pytest.mark.slow
def test_a_good_cluster_passes_every_check(digits_dir, tmp_path):
  results = check(cluster_flags(digits_dir, tmp_path / 'train', free_ports(2)))
  lines = passed_lines(results)
  assert len(lines) == 4 and len(results) == 4, results
  assert 'every host of the 1 ps + 2 workers resolves' in lines[0]
  assert 'a shard file for each of the 2 workers' in lines[2]
  assert lines[3] == '--train_dir=%s takes files' % (tmp_path / 'train')
  assert not failed_lines(results)


@pytest.mark.slow
def test_a_taken_port_and_too_few_shards_are_each_one_error_line(digits_dir, tmp_path,
                                                                 held_port):
  """The tool's contract, a fresh process: exit status 2, an `error:` line per problem and
  an `ok:` line per check that passed."""
  workers = DIGITS_TRAIN_SHARDS + 1
  ports = [held_port] + free_ports(workers - 1)
  argv = [sys.executable, '-m', 'training.check_cluster'] + cluster_flags(
      digits_dir, tmp_path / 'train', ports)
  result = run(argv)
  assert result.returncode == 2, result.stderr[-3000:]
  errors = error_lines(result.stderr)
  assert len(errors) == 2, result.stderr[-3000:]
  assert errors[0] == ('error: port %d of worker 0 (127.0.0.1:%d) is already taken on this '
                       'machine: another job or a leftover task holds it; pick another '
                       'port or stop it' % (held_port, held_port))
  assert errors[1].startswith('error: --worker_replicas=%d: ' % workers)
  assert 'has %d' % DIGITS_TRAIN_SHARDS in errors[1] and '--num_shards>=%d' % workers in errors[1]
  # The checks that pass still say so.
  passed = result.stdout.splitlines()
  assert len(passed) == 2 and passed[0].startswith('ok: every host of the 1 ps + 5 workers')
  assert passed[1] == 'ok: --train_dir=%s takes files' % (tmp_path / 'train')


REPLICAS_REFUSED = ('--replicas_to_aggregate=10 must be <= --worker_replicas=2 '
                    '(workers whose gradients one synchronous step waits for)')


@pytest.mark.slow
def test_the_trainers_refusal_of_the_sync_recipe_on_2_workers_comes_before_launch(
    digits_dir, tmp_path):
  sync = ['--sync_replicas', '--replicas_to_aggregate=10']
  results = check(cluster_flags(digits_dir, tmp_path / 'train', free_ports(2)) + sync)
  assert failed_lines(results) == [REPLICAS_REFUSED], results
  assert len(passed_lines(results)) == 3   # hosts, ports, train_dir still pass
  submit_host = train_flags(digits_dir, tmp_path / 'train') + sync + [
      '--addressing=slurm', '--num_ps_tasks=2']
  results = check(submit_host, PlannedJob(slurm_ntasks=4, slurm_nodes=2))
  assert failed_lines(results) == [REPLICAS_REFUSED], results
  assert passed_lines(results)[0].startswith('the Slurm job of --slurm_ntasks=4: its training '
                                             'step of 4 tasks (2 ps + 2 workers)')


@pytest.mark.slow
def test_a_trainer_task_whose_port_is_taken_exits_2_with_one_line(digits_dir, tmp_path,
                                                                  held_port, capfd):
  """The trainer's main in this process (capfd: TensorFlow's own lines too)."""
  ps, worker = free_ports(2)
  flags = train_flags(digits_dir, tmp_path / 'train', startup_timeout_secs=5) + [
      '--ps_hosts=127.0.0.1:%d' % ps,
      '--worker_hosts=127.0.0.1:%d,127.0.0.1:%d' % (worker, held_port),
      '--job_name=worker', '--task_index=1']
  status = train_main(flags)
  stderr = capfd.readouterr().err
  assert status == 2, stderr[-3000:]
  assert error_lines(stderr) == [
      'error: port %d of worker 1 (127.0.0.1:%d) is already taken on this machine: another '
      'job or a leftover task holds it; pick another port or stop it' % (held_port, held_port)]
  assert 'Could not start gRPC server' not in stderr   # Refused before TensorFlow.
