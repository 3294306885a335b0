"""Fixtures shared by tests in several directories. Keep this file tiny."""

import os
import socket
import subprocess

import pytest


@pytest.fixture(scope='session')
def digits_dir(tmp_path_factory):
  """scikit-learn digits converted once per test run (1437 train / 360 test); read-only."""
  from datasets.conversion.convert_images import convert  # pylint: disable=import-outside-toplevel
  from tests.once import made_once  # pylint: disable=import-outside-toplevel

  def make(output_dir):
    convert('digits', output_dir)
    return output_dir

  return made_once(tmp_path_factory, 'digits', make)


@pytest.fixture
def session_configs(monkeypatch):
  """[(graph, ConfigProto or None)] of every tf Session created during the test."""
  from tests.sessions import record_sessions  # pylint: disable=import-outside-toplevel
  return record_sessions(monkeypatch)


@pytest.fixture
def held_port():
  """A port of 127.0.0.1 held by a listening socket, as a leftover task holds it."""
  holder = socket.socket()
  holder.bind(('127.0.0.1', 0))
  holder.listen()
  yield holder.getsockname()[1]
  holder.close()


@pytest.fixture(scope='session', autouse=True)
def prestarted_entries():
  """`python <entry> ...` started by a test, a fixture, or a LocalCluster in a test is
  forked from a process with TensorFlow imported (tests/prestarted.py says what stays a
  fresh start and why; SLIMDEPLOY_TESTS_FRESH_STARTS=1 turns it off). Sessions run
  without grappler (tests/graph_optimizer.py)."""
  from tests import graph_optimizer, prestarted  # pylint: disable=import-outside-toplevel
  graph_optimizer.install()
  if os.environ.get('SLIMDEPLOY_TESTS_FRESH_STARTS') != '1':
    prestarted.start_server()
  subprocess.Popen = prestarted.Popen
  yield
  subprocess.Popen = prestarted.REAL_POPEN


@pytest.fixture(autouse=True)
def fresh_start(request, monkeypatch):
  """A test marked `fresh_start` gets subprocess.Popen itself."""
  if request.node.get_closest_marker('fresh_start') is not None:
    from tests import prestarted  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(subprocess, 'Popen', prestarted.REAL_POPEN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
  """A test marked `grappler` or `timing` keeps TensorFlow's graph optimizer, in the module
  fixtures its setup makes and the processes it starts too (tests/graph_optimizer.py)."""
  if not (item.get_closest_marker('grappler') or item.get_closest_marker('timing')):
    yield
    return
  before = os.environ.get('SLIMDEPLOY_TESTS_GRAPPLER')
  os.environ['SLIMDEPLOY_TESTS_GRAPPLER'] = '1'
  yield
  if before is None:
    del os.environ['SLIMDEPLOY_TESTS_GRAPPLER']
  else:
    os.environ['SLIMDEPLOY_TESTS_GRAPPLER'] = before


def pytest_collection_modifyitems(items):
  """Files holding slow or cluster tests first, in their own order otherwise: pytest-xdist
  hands whole files to its workers in this order, so a long file starting last would leave
  the other worker idle at the end."""
  long_files = {item.path for item in items
                if item.get_closest_marker('slow') or item.get_closest_marker('cluster')}
  items.sort(key=lambda item: item.path not in long_files)


def pytest_addoption(parser):
  from tests import worker_crashes  # pylint: disable=import-outside-toplevel
  worker_crashes.add_options(parser)


def pytest_configure(config):
  """A test past its time-out fails by its name and never hangs the run
  (tests/worker_crashes.py)."""
  from tests import worker_crashes  # pylint: disable=import-outside-toplevel
  config.pluginmanager.register(worker_crashes.Watchdog(), 'slimdeploy-watchdog')
  config.pluginmanager.register(worker_crashes.WorkerCrashes(), 'slimdeploy-worker-crashes')
