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


def _project_modules():
  """Every module but the tests' and the benchmarks' (whose flags another change moves)."""
  for name in sorted(os.listdir(ROOT)):
    if name.endswith('.py'):
      yield os.path.join(ROOT, name)
  for package in PACKAGES:
    yield from _modules(package)


def _reads_flags(node):
  return any((isinstance(n, ast.Name) and n.id == 'FLAGS') or
             (isinstance(n, ast.Attribute) and n.attr == 'FLAGS') for n in ast.walk(node))


def _flag_uses(path):
  """(line, what) for each flags.DEFINE_* call, and each absl FLAGS read outside a `main`
  (the module-level `FLAGS = flags.FLAGS` alias is no read)."""
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and node.attr.startswith('DEFINE'):
      yield node.lineno, 'defines a flag with %s' % node.attr
  for node in tree.body:
    is_main = isinstance(node, ast.FunctionDef) and node.name == 'main'
    is_alias = (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == 'FLAGS')
    if not (is_main or is_alias) and _reads_flags(node):
      yield node.lineno, 'reads absl FLAGS outside main'


def test_flags_are_declared_one_way_and_read_only_in_a_main():
  """Flags come from config classes (core.params.define_flags); nothing below a main
  reads them: the library takes the frozen config."""
  wrong = ['%s:%d %s' % (os.path.relpath(path, ROOT), line, what)
           for path in _project_modules() if not path.startswith(os.path.join(ROOT, 'core'))
           for line, what in _flag_uses(path)]
  assert not wrong, '\n'.join(wrong)
