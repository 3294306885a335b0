"""Parameters declared once, as frozen dataclasses, and turned into absl flags.

A config class lists its fields with `param(default, help)`. Entry scripts call
`define_flags(ConfigClass)` to get one absl flag per field (same name, type and default,
`--flagfile` included), then `config_from_flags(ConfigClass, FLAGS)` at the top of `main()`
to get the immutable config. Nothing below `main()` reads FLAGS; tests build configs
directly: `TrainConfig(dataset_name='digits', ...)`.

Supported field types: str, int, float, bool, Optional[...] of those (default None), and
tuple[str|int|float, ...] (a comma-separated list flag).

`parse_flags` turns absl's parse errors into one line that says where the argument came
from: a flagfile that cannot be read (and the flagfile line that named it), or the
flagfile and line of an unknown flag or a bad value.
"""

import dataclasses
import difflib
import os
import re
import sys
import typing

from absl import flags

from core import flag_help
from core.errors import USAGE, ConfigError, print_error  # ConfigError: re-exported

__all__ = ['ConfigError', 'param', 'define_flags', 'config_from_flags', 'given_flags',
           'answer_help', 'parse_flags', 'reject_positional_arguments', 'nearby',
           'config_from_argv']


def param(default, help):  # pylint: disable=redefined-builtin
  """A dataclass field that also becomes an absl flag with this help text."""
  return dataclasses.field(default=default, metadata={'help': help})


def _unwrap_optional(annotation):
  if typing.get_origin(annotation) is typing.Union:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(args) == 1:
      return args[0]
  return annotation


_GROUP_ORDER = []  # Group labels of the configs defined, in order, for --help.


def _define_one(name, annotation, default, help_text, flag_values, module_name):
  kind = _unwrap_optional(annotation)
  if typing.get_origin(kind) is tuple:
    item = typing.get_args(kind)[0]
    text = ','.join(str(v) for v in default) if default else None
    flags.DEFINE_list(name, text, '%s (comma-separated %s)' % (help_text, item.__name__),
                      flag_values=flag_values, module_name=module_name)
    return
  definers = {str: flags.DEFINE_string, int: flags.DEFINE_integer,
              float: flags.DEFINE_float, bool: flags.DEFINE_bool}
  if kind not in definers:
    raise TypeError('field %s: unsupported type %r' % (name, annotation))
  definers[kind](name, default, help_text, flag_values=flag_values,
                 module_name=module_name)


def define_flags(config_class, flag_values=flags.FLAGS):
  """Defines one absl flag per field of `config_class`, grouped for --help as the
  class's `# Group.` comments group its fields."""
  hints = typing.get_type_hints(config_class)
  groups = flag_help.field_groups(config_class)
  # An inherited group's fields come first in dataclasses.fields; the class's own
  # general flags still open its --help.
  for field in sorted(dataclasses.fields(config_class),
                      key=lambda field: groups.get(field.name, 'General') != 'General'):
    label = flag_help.group_label(groups.get(field.name, 'General'))
    if label not in _GROUP_ORDER:
      _GROUP_ORDER.append(label)
    _define_one(field.name, hints[field.name], field.default, field.metadata['help'],
                flag_values, label)


def _convert_list(name, values, item_type):
  try:
    return tuple(item_type(v) for v in values)
  except ValueError:
    kind = {int: 'an integer', float: 'a number'}.get(item_type, item_type.__name__)
    raise ConfigError('--%s=%s: every item must be %s'
                      % (name, ','.join(values), kind)) from None


def config_from_flags(config_class, flag_values=flags.FLAGS):
  """Builds the frozen `config_class` from parsed flags."""
  hints = typing.get_type_hints(config_class)
  values = {}
  for field in dataclasses.fields(config_class):
    value = flag_values[field.name].value
    kind = _unwrap_optional(hints[field.name])
    if typing.get_origin(kind) is tuple:
      value = _convert_list(field.name, value or [], typing.get_args(kind)[0])
    values[field.name] = value
  return config_class(**values)


def given_flags(config_class, flag_values=flags.FLAGS):
  """Names of the fields of `config_class` given on the command line or in a flagfile
  (absl's `present`), told apart from their defaults (eval and export let a run's record
  fill the others)."""
  return frozenset(field.name for field in dataclasses.fields(config_class)
                   if flag_values[field.name].present)


def _help_mode(argv):
  """'short', 'full' or None: the help asked for before any `--` (what follows it belongs
  to a command the entry runs)."""
  before_separator = argv[1:argv.index('--')] if '--' in argv else argv[1:]
  modes = [flag_help.HELP_FLAGS[a] for a in before_separator if a in flag_help.HELP_FLAGS]
  return max(modes) if modes else None


def answer_help(*config_classes):
  """Answers --help (-h, --helpshort) from the configs' fields alone and exits 0, before
  the entry imports TensorFlow (0.2 s instead of about 3 here): an entry script calls it
  first, with config modules that import no TensorFlow. The text is parse_flags' (the
  entry's docstring, then its flags by group). Anything else, --helpfull included (it
  lists the libraries' flags too), returns to the normal start."""
  if _help_mode(sys.argv) != 'short':
    return
  for config_class in config_classes:
    define_flags(config_class)
  sys.stdout.write(flag_help.help_text('short', flags.FLAGS, _GROUP_ORDER))
  sys.exit(0)


def nearby(path):
  """What exists near `path`, which does not: names like its missing part in the deepest
  existing directory above it (checkpoint files by their prefix), or that directory."""
  parent, name = os.path.split(os.path.normpath(path))
  while parent and not os.path.isdir(parent):
    parent, name = os.path.split(parent)
  try:
    entries = sorted({_CHECKPOINT_FILE.sub('', entry) for entry in os.listdir(parent or '.')})
  except OSError:
    entries = []
  alike = difflib.get_close_matches(name, entries, n=3, cutoff=0.6)
  if alike:
    return 'similar: %s' % ', '.join(os.path.join(parent, entry) for entry in alike)
  return 'the nearest directory that exists is %s' % (parent or os.getcwd())


_CHECKPOINT_FILE = re.compile(r'\.(index|meta|data-\d{5}-of-\d{5})$')
_FLAGFILE = ('--flagfile', '-flagfile')
_ILLEGAL_VALUE = re.compile(r'^flag --([\w-]+)=(.*?): ')


def _flagfile_target(argument):
  """The file a `--flagfile=FILE` argument or line names, or None."""
  for prefix in _FLAGFILE:
    if argument.startswith(prefix + '='):
      return os.path.expanduser(argument[len(prefix) + 1:].strip())
  return None


def _where(origin):
  """'flagfile b.cfg line 2 (in a.cfg line 1)': origin is ((path, line), ...), innermost
  first."""
  (path, line), outer = origin[0], origin[1:]
  return 'flagfile %s line %d%s' % (path, line,
                                    ''.join(' (in %s line %d)' % each for each in outer))


def _read_flagfile(path, origin, stack):
  """(line, origin) of each flag line of flagfile `path`, nested flagfiles read in place,
  as absl reads them (comments '#' and '//', blank lines and circular includes skipped).
  Raises ConfigError for a flagfile that cannot be read, naming where it was named."""
  try:
    with open(path) as handle:
      lines = handle.readlines()
  except OSError as error:
    where = _where(origin) + ': ' if origin else ''
    raise ConfigError('%s--flagfile=%s cannot be read: %s (%s; a relative path is read '
                      'from the current directory, %s)' % (
                          where, path, error.strerror or error, nearby(path),
                          os.getcwd())) from None
  for number, line in enumerate(lines, 1):
    if line.isspace() or line.startswith(('#', '//')):
      continue
    here, target = ((path, number),) + origin, _flagfile_target(line.strip())
    if target is None:
      yield line.strip(), here
    elif target not in stack + (path,):
      yield from _read_flagfile(target, here, stack + (path,))


def _arguments(argv):
  """(argument, origin) of every argument absl reads from argv, flagfiles expanded in
  place; origin () for the command line."""
  rest = list(argv[1:])
  while rest and rest[0] != '--':
    argument = rest.pop(0)
    target = (os.path.expanduser(rest.pop(0)) if argument in _FLAGFILE and rest
              else _flagfile_target(argument))
    if target is None:
      yield argument, ()
    else:
      yield from _read_flagfile(target, (), ())


def _located(error, argv):
  """absl's parse `error` as one line that says which flagfile (and line) it came from."""
  try:
    arguments = list(_arguments(argv))
  except ConfigError as unreadable:
    return str(unreadable)
  name = getattr(error, 'flagname', None)
  value = _ILLEGAL_VALUE.match(str(error))
  if value:
    name = value.group(1)
  for argument, origin in arguments:
    flag, _, text = argument.lstrip('-').partition('=')
    if flag in (name, 'no%s' % name) and (not value or text == value.group(2)):
      if not origin:
        return str(error)
      said = '' if argument in str(error) else argument + ': '   # absl's may name it
      return '%s: %s%s' % (_where(origin), said, error)
  return str(error)


def parse_flags(argv):
  """absl `flags_parser`: a bad flag is one line and exit status 2, naming the flagfile
  and line it came from; --help (or -h, --helpshort) prints the entry's own flags by
  group, --helpfull every flag; both exit 0.
  """
  mode = _help_mode(argv)
  if mode:
    sys.stdout.write(flag_help.help_text(mode, flags.FLAGS, _GROUP_ORDER))
    sys.exit(0)
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    print_error(_located(error, argv))
    sys.exit(USAGE)


def reject_positional_arguments(argv):
  """True (after printing one error line) when argv holds more than the program name."""
  if len(argv) > 1:
    print_error('unexpected arguments %s (flags look like --name=value)' % argv[1:])
    return True
  return False


def config_from_argv(config_class, argv):
  """(config, given field names) from a command line's arguments (`argv` without the
  program), read as an entry reads them (flagfiles included) but on flags of their own, so
  a caller in any process (a notebook, a test) gets the config the entry would build. A bad
  flag, a flagfile that cannot be read or a positional argument raises ConfigError with the
  entry's one line."""
  flag_values = flags.FlagValues()
  define_flags(config_class, flag_values)
  argv = ['config_from_argv'] + list(argv)
  try:
    rest = flag_values(argv)
  except flags.Error as error:
    raise ConfigError(_located(error, argv)) from None
  if len(rest) > 1:
    raise ConfigError('unexpected arguments %s (flags look like --name=value)' % rest[1:])
  return config_from_flags(config_class, flag_values), given_flags(config_class, flag_values)
