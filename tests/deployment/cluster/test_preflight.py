"""deployment/cluster/preflight.py and start_server's own checks: a taken port, a host that does not
resolve (waited for, within a bound) and a train_dir that takes no file are each one line
naming them; a good cluster on free loopback ports passes."""

import socket

import pytest

from deployment.cluster import preflight, ps_cluster
from deployment.cluster.task_spec import ClusterError, TaskSpec
from tests.cluster_tasks import free_ports

BAD_HOST = 'no-such-host.invalid'   # RFC 6761: .invalid never resolves.


def loopback_cluster(job_name='worker', task_index=0, workers=2):
  ports = ['127.0.0.1:%d' % port for port in free_ports(1 + workers)]
  return TaskSpec(tuple(ports[:1]), tuple(ports[1:]), job_name, task_index)


def test_a_good_cluster_on_free_loopback_ports_passes(tmp_path):
  task = loopback_cluster()
  assert preflight.resolution_problems(task) == []
  assert preflight.port_problems(task) == []
  assert preflight.own_port_problem(task) is None
  assert preflight.writable_dir_problems(str(tmp_path / 'new' / 'train'), '--train_dir') == []
  assert (tmp_path / 'new' / 'train').is_dir()   # Made, and the probe file removed.
  assert list((tmp_path / 'new' / 'train').iterdir()) == []


def test_a_taken_port_names_the_port_and_the_task(held_port):
  good = loopback_cluster()
  task = TaskSpec(good.ps_hosts, (good.worker_hosts[0], '127.0.0.1:%d' % held_port), 'worker', 1)
  address = '127.0.0.1:%d' % held_port
  line = ('port %d of worker 1 (%s) is already taken on this machine: another job or a '
          'leftover task holds it; pick another port or stop it' % (held_port, address))
  assert preflight.port_problems(task) == [line]
  assert preflight.own_port_problem(task) == line
  with pytest.raises(ClusterError) as raised:
    ps_cluster.start_server(task, names_timeout_secs=1)
  assert str(raised.value) == line


def test_a_port_listening_on_another_host_is_named(held_port, monkeypatch):
  # 127.0.0.1 played as another host: is_local says no, so the check connects.
  monkeypatch.setattr(preflight, 'is_local', lambda ip: False)
  task = TaskSpec(('127.0.0.1:%d' % held_port,), loopback_cluster().worker_hosts, 'ps', 0)
  assert preflight.port_problems(task) == [
      'something already listens on 127.0.0.1:%d (ps 0): before launch no task may run '
      'there; stop the leftover task or pick another port' % held_port]


def test_a_host_that_does_not_resolve_is_named_with_its_task_and_flag():
  good = loopback_cluster(workers=3)
  workers = good.worker_hosts[:2] + ('%s:2224' % BAD_HOST,)
  task = TaskSpec(good.ps_hosts, workers, 'worker', 0)
  problems = preflight.resolution_problems(task)
  assert len(problems) == 1 and '\n' not in problems[0]
  assert problems[0].startswith("worker 2's host %s does not resolve (--worker_hosts): "
                                % BAD_HOST)
  assert 'an IP address' in problems[0]
  assert preflight.port_problems(task) == []   # Left to the resolution check.
  # Another source names itself instead of the flag.
  problems = preflight.resolution_problems(TaskSpec(
      good.ps_hosts, workers, 'worker', 0, 'JobSet'))
  assert "worker 2's host %s does not resolve (JobSet)" % BAD_HOST in problems[0]


def test_resolution_is_retried_until_the_timeout_then_refused():
  good = loopback_cluster()
  task = TaskSpec(('%s:2222' % BAD_HOST,), good.worker_hosts, 'worker', 0)
  now = [0.0]
  sleeps = []

  def sleep(secs):
    sleeps.append(secs)
    now[0] += secs

  problems = preflight.wait_for_names(task, 3.0, clock=lambda: now[0], sleep=sleep)
  assert problems and problems[0].startswith("ps 0's host %s does not resolve" % BAD_HOST)
  assert len(sleeps) == 3 and sum(sleeps) == 3.0   # Three tries after the first, not more.
  with pytest.raises(ClusterError, match="ps 0's host %s does not resolve" % BAD_HOST):
    ps_cluster.start_server(task, names_timeout_secs=0.3)


def test_a_name_that_appears_late_is_waited_for(monkeypatch):
  task = loopback_cluster()
  real = socket.getaddrinfo
  calls = []

  def late(host, *args, **kwargs):
    calls.append(host)
    if len(calls) <= 2:
      raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')
    return real(host, *args, **kwargs)

  monkeypatch.setattr(socket, 'getaddrinfo', late)
  monkeypatch.setattr(preflight, 'RETRY_SECS', 0.01)
  assert preflight.wait_for_names(task, 0) == []   # 0 = forever: until the name appears.


def test_a_train_dir_that_cannot_be_written_is_named(tmp_path):
  # A file where the directory should be: tests run as root, for whom chmod stops nothing.
  blocker = tmp_path / 'file'
  blocker.write_text('not a directory')
  for path in (str(blocker), str(blocker / 'train')):
    problems = preflight.writable_dir_problems(path, '--train_dir')
    assert len(problems) == 1 and '\n' not in problems[0], problems
    assert problems[0].startswith('--train_dir=%s cannot be written: ' % path)
    assert 'not a directory' in problems[0].lower()


def test_only_addresses_of_this_machine_are_local():
  assert preflight.is_local('127.0.0.1') and preflight.is_local('127.0.1.1')
  assert not preflight.is_local('192.0.2.1')   # TEST-NET-1: never an address of a host.
