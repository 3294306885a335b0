"""The project's own modules outside tests/, for the tests that read every one with ast
(import direction, the flag layer, module and function size)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def project_modules():
  """Paths relative to ROOT of every module outside tests/: the entry scripts and every
  package (virtualenvs, hidden, cache and run directories skipped)."""
  for directory, subdirectories, files in os.walk(ROOT):
    subdirectories[:] = sorted(
        name for name in subdirectories
        if not name.startswith(('.', '__')) and name not in ('tests', 'runs')
        and not os.path.exists(os.path.join(directory, name, 'pyvenv.cfg')))
    for name in sorted(files):
      if name.endswith('.py'):
        yield os.path.relpath(os.path.join(directory, name), ROOT)


def read(relative_path):
  """The text of the module at `relative_path`."""
  with open(os.path.join(ROOT, relative_path)) as source:
    return source.read()
