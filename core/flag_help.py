"""`--help` that lists the entry's own flags, grouped as its config groups them.

absl's `--help` lists only flags defined in the `__main__` module, so an entry whose
flags come from a config class (defined in `training/config.py` and the like) listed
none, and exited with status 1. Here a config's flags are registered under one absl
"module" per group of the class (its `# Group.` comments), so absl's `--helpfull` shows
the groups, and `help_text` builds the entry's `--help`: the entry's docstring, then each
group's flags, then any flag the entry script defines itself.
"""

import inspect
import re
import sys


__all__ = ['HELP_FLAGS', 'field_groups', 'group_label', 'help_text']

HELP_FLAGS = {'--help': 'short', '-h': 'short', '-?': 'short', '--helpshort': 'short',
              '--helpfull': 'full'}
_GROUP_COMMENT = re.compile(r'^\s*#\s*([A-Z][^.:(]*)')
_FIELD = re.compile(r'^\s*(\w+)\s*:')
_SUFFIX = ' flags'


def group_label(group):
  return 'Flags' if group == 'General' else group + _SUFFIX


def field_groups(config_class):
  """{field name: group}, from the `# Group.` comments of the class body (fields before
  the first comment are in 'General'), and of the config classes it inherits from (a
  group of flags declared once for several entries, e.g. resolve.sampling.SamplingFlags).
  """
  groups = {}
  for cls in config_class.__mro__:
    if cls is object:
      continue
    for name, group in _own_field_groups(cls).items():
      groups.setdefault(name, group)
  return groups


def _own_field_groups(config_class):
  try:
    lines = inspect.getsource(config_class).splitlines()
  except (OSError, TypeError):
    lines = []
  groups, current = {}, 'General'
  for line in lines:
    comment = _GROUP_COMMENT.match(line)
    if comment:
      current = comment.group(1).strip()
      continue
    field = _FIELD.match(line)
    if field:
      groups.setdefault(field.group(1), current)
  return groups


def _main_module_names():
  main = sys.modules.get('__main__')
  names = {sys.argv[0]} if sys.argv else set()
  if main is not None:
    names.add(getattr(main, '__file__', '') or '')
    spec = getattr(main, '__spec__', None)
    if spec is not None:
      names.add(spec.name)
  return {name for name in names if name}


def help_text(mode, flag_values, group_order):
  """The text of `--help` (mode 'short') or `--helpfull` ('full')."""
  main = sys.modules.get('__main__')
  parts = [(getattr(main, '__doc__', None) or '').strip()]
  by_module = flag_values.flags_by_module_dict()
  for label in group_order:
    parts.append(flag_values.module_help(label).strip())
  own = [name for name in by_module if name in _main_module_names()]
  for name in own:
    parts.append(flag_values.module_help(name).strip().replace(name + ':', 'Flags:', 1))
  if mode == 'full':
    for name in sorted(by_module):
      if name not in own and name not in group_order:
        parts.append(flag_values.module_help(name).strip())
  else:
    parts.append('Also: --flagfile=FILE reads flags from a file; --helpfull lists every '
                 'flag, logging and TensorFlow ones included.')
  return '\n\n'.join(part for part in parts if part) + '\n'
