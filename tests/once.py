"""Test data made once per `make test` and shared by every pytest-xdist worker.

`made_once(tmp_path_factory, name, make)` calls `make(directory)` the first time any worker
asks for `name` and hands every later caller, in this process or another, the value it
returned (pickled beside the data). Workers wait on a file lock while one of them makes it,
so converted records and trained runs are made once, not once per worker. What it returns
is read-only for the tests: a test that writes copies it first.
"""

import fcntl
import os
import pickle

_VALUES = {}


def shared_root(tmp_path_factory):
  """The run's base temporary directory: a worker's own is `<run's>/gwN` under xdist."""
  base = tmp_path_factory.getbasetemp()
  return base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base


def made_once(tmp_path_factory, name, make):
  """The value `make(directory)` returned for `name`, made by the first caller of the run."""
  if name not in _VALUES:
    root = os.path.join(str(shared_root(tmp_path_factory)), 'made_once')
    os.makedirs(root, exist_ok=True)
    value_path = os.path.join(root, name + '.pickle')
    with open(os.path.join(root, name + '.lock'), 'w') as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      if not os.path.exists(value_path):
        value = make(os.path.join(root, name))
        with open(value_path + '.part', 'wb') as part:
          pickle.dump(value, part)
        os.replace(value_path + '.part', value_path)
      with open(value_path, 'rb') as stored:
        _VALUES[name] = pickle.load(stored)
  return _VALUES[name]
