"""Fixtures shared by tests in several directories. Keep this file tiny."""

import socket

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
