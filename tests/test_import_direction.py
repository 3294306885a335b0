"""The packages import downwards only (docs/architecture.md), read from every module's
imports with ast, including imports inside functions."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('core', 'checkpoints', 'nets', 'deployment', 'datasets', 'resolve', 'training',
            'evaluation', 'serving')
# package -> the project packages it must not import.
FORBIDDEN = {
    'core': set(PACKAGES) - {'core'},
    'checkpoints': {'nets', 'deployment', 'datasets', 'resolve', 'training', 'evaluation',
                    'serving'},
    'nets': {'datasets', 'resolve', 'training', 'evaluation', 'serving'},
    'deployment': {'datasets', 'resolve', 'training', 'evaluation', 'serving', 'nets'},
    'datasets': {'resolve', 'training', 'evaluation', 'serving'},
    'resolve': {'training', 'evaluation', 'serving'},
    'evaluation': {'training', 'serving'},
    'serving': {'training'},
}


def _imports(path):
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      yield node.lineno, node.module


def _modules(package):
  for directory, _, files in os.walk(os.path.join(ROOT, package)):
    for name in sorted(files):
      if name.endswith('.py'):
        yield os.path.join(directory, name)


@pytest.mark.parametrize('package', sorted(FORBIDDEN))
def test_no_import_points_upwards(package):
  wrong = ['%s:%d imports %s' % (os.path.relpath(path, ROOT), line, module)
           for path in _modules(package) for line, module in _imports(path)
           if module.split('.')[0] in FORBIDDEN[package]]
  assert not wrong, '\n'.join(wrong)


def test_every_package_is_ruled():
  found = {name for name in os.listdir(ROOT)
           if os.path.isfile(os.path.join(ROOT, name, '__init__.py'))}
  assert found - {'benchmarks'} <= set(PACKAGES), found - set(PACKAGES)
