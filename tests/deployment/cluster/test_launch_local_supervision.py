"""deployment.cluster.launch_local's supervision of a ps cluster, on stand-in tasks (no
TensorFlow: tests/launch_local_runs.py): the launcher runs any command and says where the
logs are; a failed task stops the cluster and gives its status; the chief's success ends
the job with 0; a stop request stops workers before parameter servers; tasks do not
outlive a launcher killed outright; and the launcher's mistakes are one line and status 2,
nothing started. (The same with the real trainer: tests/deployment/test_launch_local.py.)"""

import os
import shlex
import subprocess
import sys

import pytest

from core import errors
from core.params import config_from_argv
from deployment.cluster import launch_local
from deployment.cluster.launch_local import LaunchConfig
from tests.cluster_tasks import ROOT, wait_for
from tests.launch_local_runs import (all_ready, environment, fake_cluster,
                                     fake_task_command, sigterm_time)


def test_the_launcher_runs_any_command_and_says_where_the_logs_are(tmp_path):
  """Not the trainer: a stand-in gets the cluster flags; with no --task_log_dir the logs
  go to runs/launch_local below the working directory, as the start-up line says."""
  command = fake_task_command(tmp_path, 'worker-0:finish,ps-0:finish', 2)
  result = subprocess.run(
      [sys.executable, '-m', 'deployment.launch_local', '--num_ps=1', '--num_workers=1',
       '--isolation=none', '--'] + command,
      cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=60)
  assert result.returncode == 0, result.stdout + result.stderr
  startup = result.stdout.splitlines()[0]
  assert ('each runs %s + --ps_hosts' % shlex.join(command)) in startup, startup
  assert '+ --ps_hosts --worker_hosts --job_name --task_index' in startup
  assert startup.endswith('logs: runs/launch_local/<job>-<index>.log'), startup
  logs = tmp_path / 'runs' / 'launch_local'
  assert sorted(os.listdir(logs)) == ['ps-0.log', 'worker-0.log']
  assert 'worker-0 ready' in (logs / 'worker-0.log').read_text()
  assert 'ps-0: 0, worker-0: 0' in result.stdout


def test_a_failed_task_stops_the_cluster_and_gives_its_status(tmp_path):
  with fake_cluster(tmp_path, 'worker-1:exit5') as cluster:
    status = cluster.supervise(lambda: False, grace_secs=10, poll_secs=0.05)
  assert status == 5
  assert [t.returncode for t in cluster.tasks] == [0, 0, 5]   # ps, chief: stopped.
  # Workers are asked to stop before parameter servers.
  assert sigterm_time(cluster, 'worker-0') <= sigterm_time(cluster, 'ps-0')


def test_the_chiefs_success_ends_the_job_with_0(tmp_path):
  with fake_cluster(tmp_path, 'worker-0:finish,worker-1:finish,ps-0:finish') as cluster:
    assert cluster.supervise(lambda: False, grace_secs=10, poll_secs=0.05) == 0


def test_a_stop_request_stops_workers_then_ps_and_returns_the_chiefs_status(tmp_path):
  with fake_cluster(tmp_path, '') as cluster:
    ready = lambda: all_ready(str(tmp_path / 'logs'), [t.name for t in cluster.tasks])
    status = cluster.supervise(ready, grace_secs=10, poll_secs=0.05)
  assert status == 0 and [t.returncode for t in cluster.tasks] == [0, 0, 0]
  assert max(sigterm_time(cluster, 'worker-0'), sigterm_time(cluster, 'worker-1')) <= (
      sigterm_time(cluster, 'ps-0'))


def _running(pid):
  try:
    with open('/proc/%d/stat' % pid) as stat:
      return stat.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


def test_tasks_do_not_outlive_a_killed_launcher(tmp_path):
  """The launcher itself SIGKILLed (no clean-up possible): its tasks get SIGTERM."""
  command = fake_task_command(tmp_path, '', 2)
  launcher = subprocess.Popen([sys.executable, '-c', (
      'import sys, time; sys.path.insert(0, %r)\n'
      'from deployment.cluster.launch_local import LocalCluster\n'
      'cluster = LocalCluster(1, 1, %r, %r, isolation="none").start()\n'
      'print(" ".join(str(t.process.pid) for t in cluster.tasks), flush=True)\n'
      'time.sleep(60)') % (ROOT, command, str(tmp_path / 'logs'))],
                              stdout=subprocess.PIPE, text=True)
  try:
    pids = [int(p) for p in launcher.stdout.readline().split()]
    wait_for(lambda: all_ready(str(tmp_path / 'logs'), ['ps-0', 'worker-0']),
             'the tasks to install their SIGTERM handlers', timeout=60)
    launcher.kill()
    launcher.wait()
    wait_for(lambda: not any(_running(pid) for pid in pids), 'the tasks to end', timeout=10)
  finally:
    launcher.kill()
    launcher.wait()
  for name in ('ps-0', 'worker-0'):
    assert 'got SIGTERM' in open(tmp_path / 'logs' / (name + '.log')).read()


def test_a_launcher_mistake_exits_2_with_one_line(tmp_path):
  """The entry's contract, in a fresh process: status 2, one `error:` line, nothing
  started (the other mistakes: the next test, in this process)."""
  result = subprocess.run([sys.executable, '-m', 'deployment.launch_local', '--num_ps=-1',
                           '--', 'true'], cwd=tmp_path, env=environment(),
                          capture_output=True, text=True, timeout=60)
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert lines == ['error: --num_ps=-1, --num_workers=2: --num_ps must be >= 0 (0: workers '
                   'only, all-reduce) and --num_workers >= 1'], lines
  assert not os.listdir(tmp_path)  # Nothing started, no log directory made.


@pytest.mark.parametrize('argv, text', [
    (['--num_ps=-1', '--', 'true'], '--num_ps=-1, --num_workers=2: --num_ps must be >= 0'),
    (['--num_ps=0', '--num_workers=0', '--', 'true'], '--num_workers >= 1'),
    (['--', 'true', '--worker_hosts=a:1'], '--worker_hosts=a:1'),
    (['--num_workers=1'], 'no command to run'),
    (['--num_workers=1', '--'], 'no command to run'),
    (['--task_log_dir=', '--', 'true'], '--task_log_dir is required'),
    (['--isolation=wide', '--', 'true'], '--isolation=wide is not known'),
    (['--addressing=env', '--', 'true'], '--addressing=env is not known'),
    (['--num_data_workers=-1', '--', 'true'], '--num_data_workers=-1'),
    (['--num_data_workers=1', '--', 'true', '--data_service_address=a:1'],
     '--data_service_address=a:1'),
])
def test_launcher_mistakes_are_one_line_and_status_2(argv, text, tmp_path, monkeypatch,
                                                     capsys):
  """What the entry's main does (deployment/launch_local.py): its flags read into a
  LaunchConfig, the command after `--` (absl's leftovers) launched; a mistake reported."""
  monkeypatch.chdir(tmp_path)
  split = argv.index('--') if '--' in argv else len(argv)
  flags, command = argv[:split], argv[split + 1:]
  try:
    launch_local.launch(config_from_argv(LaunchConfig, flags)[0], command)
  except errors.EXPECTED as error:
    status = errors.report(error)
  else:
    raise AssertionError('launched: %s' % argv)
  assert status == 2
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and text in lines[0], lines
  assert not os.listdir(tmp_path)  # Nothing started, no log directory made.
