"""Tests for datasets/inputs/data_service.py: each role's flags checked before a server
starts (one ConfigError line naming the flag), and `python -m datasets.data_service` on a
user mistake: one `error:` line, exit status 2 (a flag mistake in a fresh process, a busy
port through `serve` in this one; its serving and SIGTERM are exercised by
tests/datasets/inputs/test_service_client.py and tests/training/test_train_data_service.py)."""

import os
import socket
import subprocess
import sys
import threading

import pytest

from core.errors import USAGE, report
from core.params import ConfigError
from datasets.inputs.data_service import (ServerConfig, check_server_config, serve,
                                          with_addressing)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DISPATCHER = dict(role='dispatcher', port=5050, work_dir='/tmp/journal')
WORKER = dict(role='worker', dispatcher_address='localhost:5050')


@pytest.mark.parametrize('flags, named', [
    (dict(role='router'), "--role='router'"),
    (dict(DISPATCHER, port=0), '--port=0'),
    (dict(DISPATCHER, port=70000), '--port=70000'),
    (dict(DISPATCHER, work_dir=''), '--work_dir is required'),
    (dict(DISPATCHER, worker_timeout_secs=0.0), '--worker_timeout_secs=0.0'),
    (dict(DISPATCHER, worker_addresses=('nohost',)), "--worker_addresses='nohost'"),
    (dict(DISPATCHER, dispatcher_address='h:1'), '--dispatcher_address'),
    (dict(WORKER, dispatcher_address=''), '--dispatcher_address is required'),
    (dict(WORKER, dispatcher_address='localhost'), "--dispatcher_address='localhost'"),
    (dict(WORKER, worker_address='h:x'), "--worker_address='h:x'"),
    (dict(WORKER, work_dir='/tmp/j'), '--work_dir'),
], ids=lambda value: value if isinstance(value, str) else None)
def test_each_role_refuses_the_flags_it_cannot_use(flags, named):
  with pytest.raises(ConfigError, match=named.replace('?', r'\?')):
    check_server_config(ServerConfig(**flags))


def test_valid_roles_pass():
  check_server_config(ServerConfig(**DISPATCHER))
  check_server_config(ServerConfig(**WORKER, worker_address='host-1:6000'))


def test_a_flag_mistake_is_one_line_and_status_2():
  """The tool's contract, in a fresh process: status 2, one `error:` line."""
  result = subprocess.run([sys.executable, '-m', 'datasets.data_service', '--role=dispatcher',
                           '--port=5050'], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert result.returncode == USAGE and len(errors) == 1 and (
      '--work_dir is required' in errors[0]), result.stderr[-2000:]


def test_a_busy_port_is_one_line_and_status_2(tmp_path, capsys):
  """What the tool's main does with a port it cannot listen on, in this process: serve
  raises the one line, reported with status 2."""
  with socket.socket() as busy:
    busy.bind(('', 0))
    busy.listen()
    config = ServerConfig(role='dispatcher', port=busy.getsockname()[1],
                          work_dir=str(tmp_path))
    with pytest.raises(ConfigError) as raised:
      serve(config, stop_event=threading.Event())
  assert report(raised.value) == USAGE
  errors = capsys.readouterr().err.splitlines()
  assert len(errors) == 1 and errors[0].startswith('error: ') and (
      'the server does not start' in errors[0]), errors


SLURM_TASK = {'SLURM_JOB_ID': '1234', 'SLURM_STEP_ID': '1', 'SLURM_STEP_NUM_TASKS': '2',
              'SLURM_STEP_NODELIST': 'n[1-2]', 'SLURM_STEP_TASKS_PER_NODE': '1(x2)'}


def test_under_slurm_task_0_is_the_dispatcher_and_the_others_its_workers():
  slurm = ServerConfig(addressing='slurm', work_dir='/runs/x/data_service',
                       address_file='/runs/x/dispatcher')
  top = 20000 + 1234 % 2500 * 16 + 15   # deployment/cluster/slurm_env.py: the slot's top port.
  dispatcher, address = with_addressing(slurm, dict(SLURM_TASK, SLURM_PROCID='0'))
  check_server_config(dispatcher)
  assert (dispatcher.role, dispatcher.port, address) == ('dispatcher', top, 'n1:%d' % top)
  assert dispatcher.work_dir == '/runs/x/data_service'
  worker, address = with_addressing(slurm, dict(SLURM_TASK, SLURM_PROCID='1'))
  check_server_config(worker)
  assert (worker.role, worker.port, worker.worker_address, worker.dispatcher_address) == (
      'worker', top, 'n2:%d' % top, 'n1:%d' % top)
  assert (worker.work_dir, worker.address_file) == ('', '')
  assert with_addressing(ServerConfig(**WORKER), {}) == (ServerConfig(**WORKER), None)


@pytest.mark.parametrize('flags, environ, named', [
    (dict(addressing='slurm', role='worker'), SLURM_TASK, 'drop --role'),
    (dict(addressing='slurm', port=5050), SLURM_TASK, 'drop --port'),
    (dict(addressing='slurm'), {}, '--addressing=slurm needs an srun step'),
    (dict(addressing='slurm'), dict(SLURM_TASK, SLURM_PROCID='0', SLURM_STEP_NODELIST='n['),
     "SLURM_STEP_NODELIST='n\\['"),
    (dict(addressing='k8s'), {}, "--addressing='k8s' must be one of flags, slurm"),
])
def test_slurm_addressing_mistakes_are_one_line(flags, environ, named):
  with pytest.raises(ConfigError, match=named):
    with_addressing(ServerConfig(**flags), dict(environ, SLURM_PROCID='0') if environ
                    and 'SLURM_PROCID' not in environ else environ)
