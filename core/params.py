"""Parameters declared once, as frozen dataclasses, and turned into absl flags.

A config class lists its fields with `param(default, help)`. Entry scripts call
`define_flags(ConfigClass)` to get one absl flag per field (same name, type and default,
`--flagfile` included), then `config_from_flags(ConfigClass, FLAGS)` at the top of `main()`
to get the immutable config. Nothing below `main()` reads FLAGS; tests build configs
directly: `TrainConfig(dataset_name='digits', ...)`.

Supported field types: str, int, float, bool, Optional[...] of those (default None), and
tuple[str|int|float, ...] (a comma-separated list flag).
"""

import dataclasses
import sys
import typing

from absl import flags

from core import flag_help
from core.errors import USAGE, ConfigError, print_error  # ConfigError: re-exported

__all__ = ['ConfigError', 'param', 'define_flags', 'config_from_flags', 'given_flags',
           'answer_help', 'parse_flags', 'reject_positional_arguments']


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


def parse_flags(argv):
  """absl `flags_parser`: a bad flag is one line and exit status 2; --help (or -h,
  --helpshort) prints the entry's own flags by group, --helpfull every flag; both exit 0.
  """
  mode = _help_mode(argv)
  if mode:
    sys.stdout.write(flag_help.help_text(mode, flags.FLAGS, _GROUP_ORDER))
    sys.exit(0)
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    print_error(error)
    sys.exit(USAGE)


def reject_positional_arguments(argv):
  """True (after printing one error line) when argv holds more than the program name."""
  if len(argv) > 1:
    print_error('unexpected arguments %s (flags look like --name=value)' % argv[1:])
    return True
  return False
