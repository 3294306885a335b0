"""Tests for datasets/inputs/service_servers.py: each role's flags checked before a server
starts (one ConfigError line naming the flag), and `python -m datasets.data_service` on a
user mistake: one `error:` line, exit status 2 (its serving and SIGTERM are exercised by
tests/datasets/inputs/test_service_client.py and tests/training/test_train_data_service.py)."""

import os
import socket
import subprocess
import sys

import pytest

from core.errors import USAGE
from core.params import ConfigError
from datasets.inputs.service_servers import ServerConfig, check_server_config

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


def _run(*flags):
  return subprocess.run([sys.executable, '-m', 'datasets.data_service'] + list(flags),
                        cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_bad_flags_and_a_busy_port_are_one_line_and_status_2(tmp_path):
  with socket.socket() as busy:
    busy.bind(('', 0))
    busy.listen()
    runs = [_run('--role=dispatcher', '--port=5050'),
            _run('--role=dispatcher', '--port=%d' % busy.getsockname()[1],
                 '--work_dir=%s' % tmp_path)]
  for result, text in zip(runs, ['--work_dir is required', 'the server does not start']):
    errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
    assert result.returncode == USAGE and len(errors) == 1 and text in errors[0], (
        result.stderr[-2000:])
