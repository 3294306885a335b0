"""The packages import downwards only (docs/architecture.md), read from every module's
imports with ast, including imports inside functions; and only a `main` reads absl FLAGS."""

import ast
import os
import re

import pytest

from tests.project_sources import ROOT, project_modules, read

PACKAGES = ('core', 'checkpoints', 'nets', 'deployment', 'datasets', 'resolve', 'training',
            'evaluation', 'serving', 'demos')
# package -> the project packages it must not import.
FORBIDDEN = {
    'core': set(PACKAGES) - {'core'},
    'checkpoints': {'nets', 'deployment', 'datasets', 'resolve', 'training', 'evaluation',
                    'serving'},
    'nets': {'deployment', 'datasets', 'resolve', 'training', 'evaluation', 'serving'},
    'deployment': {'datasets', 'resolve', 'training', 'evaluation', 'serving', 'nets'},
    'datasets': {'resolve', 'training', 'evaluation', 'serving'},
    'resolve': {'training', 'evaluation', 'serving'},
    'evaluation': {'training', 'serving'},
    'serving': {'training'},
    # The demos drive the entry scripts as a user does, through their command lines.
    'demos': set(PACKAGES) - {'core', 'demos'},
}


def _imports(path, with_names=False):
  """(line, dotted module) of each import; `with_names` reads `from a import b` as a.b, so a
  module imported from its package (`from deployment import model_deploy`) is found too."""
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names if with_names else [None]:
        yield node.lineno, node.module + ('.' + alias.name if alias else '')


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


# ------------------------------------------------------------------------ inside a package
# A package split into rooms keeps the rule inside it too (style.md 11). Each table maps a
# room (a subpackage or module path under the package, dotted, longest prefix wins) to the
# rooms it must not import; a module in no room is ruled by the '' entry.
# deployment/ by role: building a step at the top level (model_deploy, deployment_config,
# accumulation, sync_replicas, precision, ...), which may read traces and session settings
# but never touches a cluster's processes; each subpackage (the processes of a cluster, the
# trace readers, the session settings) imports no other room; launch_local, the tool, only
# cluster/.
ROOMS_OF_DEPLOYMENT = ('', 'launch_local', 'cluster', 'trace', 'session')
INSIDE_DEPLOYMENT = {
    '': {'cluster', 'launch_local'},
    'launch_local': {'', 'trace', 'session'},
    'cluster': set(ROOMS_OF_DEPLOYMENT) - {'cluster'},
    'trace': set(ROOMS_OF_DEPLOYMENT) - {'trace'},
    'session': set(ROOMS_OF_DEPLOYMENT) - {'session'},
}

# datasets/, bottom up: formats/ (shards, the converted layout, record formats), splits/
# (source split lists), the declarations at the top level (dataset modules, the registry,
# the video spec), then the readers, writers and checks beside one another; the tools,
# thin mains at the cited paths, above everything.
_DATASET_TOOLS = ('convert_images', 'convert_videos', 'make_synthetic_videos',
                  'verify_records', 'migrate_video_records', 'export_media_sequence',
                  'data_service')
_BESIDE = {'conversion', 'inputs', 'checks', 'synthetic'}
INSIDE_DATASETS = {
    'formats': {'splits', ''} | _BESIDE | set(_DATASET_TOOLS),
    'splits': {''} | _BESIDE | set(_DATASET_TOOLS),
    '': _BESIDE | set(_DATASET_TOOLS),
    **{room: (_BESIDE - {room}) | set(_DATASET_TOOLS) for room in _BESIDE},
    **{tool: set() for tool in _DATASET_TOOLS},
}

INSIDE = {'deployment': INSIDE_DEPLOYMENT, 'datasets': INSIDE_DATASETS}


def _room(module, rooms):
  """The longest room of `rooms` that `module` (dotted, inside the package) lies in."""
  best = ''
  for room in rooms:
    if room and (module == room or module.startswith(room + '.')) and len(room) > len(best):
      best = room
  return best


def inside_violations(package, rooms):
  """'path:line imports module (room a -> room b)' for each import across forbidden rooms."""
  wrong = []
  for path in _modules(package):
    relative = os.path.relpath(path, ROOT)
    dotted = relative[:-len('.py')].replace(os.sep, '.')
    own = _room(dotted[len(package) + 1:], rooms)
    for line, module in _imports(path, with_names=True):
      if not module.startswith(package + '.'):
        continue
      theirs = _room(module[len(package) + 1:], rooms)
      if theirs != own and theirs in rooms.get(own, ()):
        wrong.append('%s:%d imports %s (%s -> %s)' % (relative, line, module, own or '(top)',
                                                      theirs or '(top)'))
  return wrong


def test_rooms_are_found_by_longest_prefix():
  rooms = {'': set(), 'a': set(), 'a.b': set()}
  assert [_room(m, rooms) for m in ('x', 'a', 'a.c', 'a.b.c', 'ab')] == ['', 'a', 'a', 'a.b', '']


def test_a_module_imported_from_its_package_is_found(tmp_path):
  path = tmp_path / 'm.py'
  path.write_text('from deployment import model_deploy, xla\nimport deployment.trace\n')
  assert list(_imports(str(path), with_names=True)) == [
      (1, 'deployment.model_deploy'), (1, 'deployment.xla'), (2, 'deployment.trace')]


@pytest.mark.parametrize('package', sorted(INSIDE))
def test_no_import_points_upwards_inside_a_package(package):
  wrong = inside_violations(package, INSIDE[package])
  assert not wrong, '\n'.join(wrong)


# ---------------------------------------------------------------------------- the flag layer
# "No module other than a main reads absl FLAGS" (docs/architecture.md): a reference to the
# name FLAGS, or to flags.FLAGS, stands only inside a function named `main`, in a
# module-level define_flags(...) / parse_flags(...) call or the `FLAGS = flags.FLAGS`
# binding; and flags are declared one way, as `param` fields turned into flags by
# core/params.py, so `flags.DEFINE_*` appears nowhere else. The flag layer itself is exempt.
FLAG_LAYER = {'core/params.py', 'core/flag_help.py'}
FLAG_DEFINERS = {'core/params.py'}

# Offenders allowed for now (an entry that no longer offends fails
# test_allow_lists_name_only_current_offenders, so the lists only shrink): none.
FLAGS_READ_ALLOWED = set()
DEFINE_ALLOWED = set()

_DEFINE = re.compile(r'^DEFINE(_\w+)?$')


def _parse(relative_path):
  return ast.parse(read(relative_path), relative_path)


def _name(node):
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    return node.attr
  return None


def _is_flags(node):
  """FLAGS, or flags.FLAGS."""
  return ((isinstance(node, ast.Name) and node.id == 'FLAGS') or
          (isinstance(node, ast.Attribute) and node.attr == 'FLAGS'
           and _name(node.value) == 'flags'))


def _is_flag_layer_statement(node):
  """`FLAGS = flags.FLAGS`, or a call statement of define_flags(...) or parse_flags(...)."""
  if isinstance(node, ast.Assign):
    return [_name(t) for t in node.targets] == ['FLAGS'] and _is_flags(node.value)
  return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
          and _name(node.value.func) in ('define_flags', 'parse_flags'))


def misplaced_flags_reads(tree):
  """Lines of the references to FLAGS or flags.FLAGS outside the places allowed above."""
  found = []

  def visit(node, in_main, at_module_level):
    if at_module_level and isinstance(node, ast.stmt) and _is_flag_layer_statement(node):
      return
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      in_main = in_main or node.name == 'main'
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
      at_module_level = False
    if _is_flags(node) and not in_main:
      found.append(node.lineno)
      return
    for child in ast.iter_child_nodes(node):
      visit(child, in_main, at_module_level)

  visit(tree, False, True)
  return found


def flag_definitions(tree):
  """Lines that name an absl flag definer (flags.DEFINE_string, an imported DEFINE_enum)."""
  lines = set()
  for node in ast.walk(tree):
    name = node.name.split('.')[-1] if isinstance(node, ast.alias) else _name(node)
    if _DEFINE.match(name or ''):
      lines.add(node.lineno)
  return sorted(lines)


@pytest.mark.parametrize('source, lines', [
    ('FLAGS = flags.FLAGS\ndefine_flags(Config)\ndefine_flags(Config, flags.FLAGS)\n'
     'def main(argv):\n  return config_from_flags(Config, FLAGS)\n'
     'if __name__ == "__main__":\n  define_flags(Config)\n  app.run(main)\n', []),
    ('def _helper():\n  return FLAGS.rounds\n', [2]),
    ('def run(values=flags.FLAGS):\n  pass\n', [1]),
    ('def main(argv):\n  def inner():\n    return FLAGS.x\n  return inner()\n', []),
    ('class Settings:\n  rounds = FLAGS.rounds\n', [2]),
    ('rounds = FLAGS.rounds\n', [1]),
    ('def parse(argv):\n  return FLAGS(argv)\n', [2]),
    ('FLAGS = other.FLAGS\n', [1]),
])
def test_the_flags_rule_tells_main_from_helpers(source, lines):
  assert misplaced_flags_reads(ast.parse(source)) == lines


def test_the_define_rule_finds_every_definer():
  source = ('flags.DEFINE_string("a", None, "")\nfrom absl.flags import DEFINE_integer\n'
            'absl.flags.DEFINE_enum("b", "x", ["x"], "")\nCLUSTER_FLAGS = ()\n')
  assert flag_definitions(ast.parse(source)) == [1, 2, 3]


def test_no_module_other_than_a_main_reads_flags():
  wrong = ['%s:%d reads FLAGS outside main (build the config in main and pass it down)'
           % (path, line) for path in project_modules()
           if path not in FLAG_LAYER | FLAGS_READ_ALLOWED
           for line in misplaced_flags_reads(_parse(path))]
  assert not wrong, '\n'.join(wrong)


def test_flags_are_defined_only_by_core_params():
  wrong = ['%s:%d defines an absl flag directly (declare a param field and call '
           'define_flags)' % (path, line) for path in project_modules()
           if path not in FLAG_DEFINERS | DEFINE_ALLOWED
           for line in flag_definitions(_parse(path))]
  assert not wrong, '\n'.join(wrong)


def test_allow_lists_name_only_current_offenders():
  modules = set(project_modules())
  stale = sorted(
      ['%s: in FLAGS_READ_ALLOWED' % path for path in FLAGS_READ_ALLOWED
       if path not in modules or not misplaced_flags_reads(_parse(path))] +
      ['%s: in DEFINE_ALLOWED' % path for path in DEFINE_ALLOWED
       if path not in modules or not flag_definitions(_parse(path))])
  assert not stale, 'no longer offends, remove it from the list:\n' + '\n'.join(stale)
