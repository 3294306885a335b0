"""A training run's record read back, so eval.py and export.py use what the run trained.

The record is `<train_dir>/flags.cfg`, written by the trainer at start (training.run_record):
one `--name=value` line per training flag that was set (`--name` / `--noname` for booleans,
lists comma-separated). `find_record` finds it from a --checkpoint_path (a train_dir, or a
checkpoint prefix or file inside one); `fill_from_record` gives every field a `Link` names
the run's value unless the user gave that flag, names in one log line each given flag that
differs from the run's, and says where each setting came from: 'record', 'flag' or
'default'. Which training flag feeds which entry flag is the entry's table of `Link`s
(e.g. --train_image_size -> --eval_image_size). No record: every setting is the flag's.
`check_checkpoint_path` refuses, before any other flag is asked for, a path that names
nothing on disk (a mistyped run dir), with what its directory holds of a similar name.
"""

import dataclasses
import os
import typing
from typing import Optional

from absl import logging

from core.errors import ConfigError, DataError, require
from core.params import nearby

__all__ = ['RECORD_FILE', 'RunRecord', 'Link', 'Setting', 'Settings', 'find_record',
           'read_record', 'fill_from_record', 'changed_fields', 'no_record',
           'check_checkpoint_path']

RECORD_FILE = 'flags.cfg'   # the trainer writes it (training.run_record.FLAGFILE)
RECORD, FLAG, DEFAULT = 'record', 'flag', 'default'


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """The flags a run recorded. values: {training flag name: text as written}; booleans
  are 'true' / 'false'."""
  path: str
  values: dict

  def text(self, name):
    """The recorded text of training flag `name`, or None (unset in the run)."""
    return self.values.get(name)

  def number(self, name, default):
    """Training flag `name` as a float (`default` when the run left it unset)."""
    text = self.text(name)
    return default if text is None else _convert(self, name, text, float)


@dataclasses.dataclass(frozen=True)
class Link:
  """Entry flag `name` takes training flag `recorded`'s value, unless one of `unless` was
  given (a flag that excludes it, e.g. --eval_frames excludes --clip_frames). With
  `is_dir`, a recorded directory that no longer exists needs the flag (a moved run)."""
  recorded: str
  name: str
  unless: tuple = ()
  is_dir: bool = False


@dataclasses.dataclass(frozen=True)
class Setting:
  """One setting of the entry: its value and where it came from (RECORD, FLAG, DEFAULT);
  `recorded` names the training flag when it came from the record."""
  name: str
  value: object
  source: str
  recorded: Optional[str] = None

  def describe(self):
    where = self.source
    if self.recorded and self.recorded != self.name:
      where += ': --%s' % self.recorded
    return '%s=%s (%s)' % (self.name, self.value, where)


@dataclasses.dataclass(frozen=True)
class Settings:
  """The linked settings of one entry run and the record they were read from (or None)."""
  record: Optional[RunRecord]
  entries: tuple = ()

  def describe(self):
    """One line for the log: the record, then each setting with its source."""
    origin = ('from the run\'s record %s' % self.record.path if self.record
              else 'no run record')
    return 'settings %s: %s' % (origin, ', '.join(e.describe() for e in self.entries))

  def as_dict(self):
    """For a JSON report: {"record": path or None, name: {"value", "from"}}."""
    content = {'record': self.record.path if self.record else None}
    for entry in self.entries:
      content[entry.name] = {'value': entry.value, 'from': entry.source}
      if entry.recorded:
        content[entry.name]['recorded_as'] = entry.recorded
    return content


def _parse_line(path, number, line):
  """-> (name, text) of one `--name=value`, `--name` or `--noname` line."""
  if not line.startswith('--'):
    raise DataError('%s line %d: %r is not a --name=value flag line (a damaged run '
                    'record; the run\'s flags are also in its TensorBoard text run/flags)'
                    % (path, number, line))
  name, equals, text = line[2:].partition('=')
  return name, text if equals else 'true'


def read_record(path):
  """The RunRecord in `path` (a flags.cfg). Raises DataError on a line that is not a flag."""
  values = {}
  with open(path) as handle:
    for number, raw in enumerate(handle, 1):
      line = raw.strip()
      if not line or line.startswith('#'):
        continue
      name, text = _parse_line(path, number, line)
      values[name] = text
      if '=' not in line and name.startswith('no'):
        values.setdefault(name[2:], 'false')   # --noname: boolean `name` off
  return RunRecord(path, values)


def find_record(checkpoint_path):
  """The record of the run `checkpoint_path` belongs to (a train_dir, or a checkpoint
  prefix or file inside one), or None: no path, or no record beside it (an older run, a
  checkpoint outside a train_dir)."""
  if not checkpoint_path:
    return None
  directory = (checkpoint_path if os.path.isdir(checkpoint_path)
               else os.path.dirname(checkpoint_path))
  path = os.path.join(directory, RECORD_FILE)
  return read_record(path) if os.path.isfile(path) else None


def _exists(path):
  """Whether `path` is a directory, a file or a checkpoint prefix (its .index)."""
  return os.path.exists(path) or os.path.exists(path + '.index')


def check_checkpoint_path(path, flag='checkpoint_path'):
  """ConfigError when `path` (a train_dir, a checkpoint prefix or one of its files) names
  nothing on disk: one line naming the flag, the path, what exists nearby and what is
  accepted. A remote path (gs://...) is left to TensorFlow's reader."""
  if not path or '://' in path or _exists(path):
    return
  raise ConfigError('--%s=%s: no such checkpoint, file or directory (%s); give a training '
                    'directory, a checkpoint prefix such as model.ckpt-1000, or one of its '
                    'files'
                    % (flag, path, nearby(path)))


def _unwrap(annotation):
  if typing.get_origin(annotation) is typing.Union:
    return next(a for a in typing.get_args(annotation) if a is not type(None))
  return annotation


def _convert(record, name, text, kind):
  """`text` of training flag `name` as `kind`; DataError when it is not one."""
  if kind is bool and text in ('true', 'false'):
    return text == 'true'
  try:
    if kind is not bool:
      return kind(text)
  except ValueError:
    pass
  raise DataError('%s: --%s=%s is not a %s (a damaged run record)'
                  % (record.path, name, text, kind.__name__))


def _recorded_value(record, link, kind):
  text = record.text(link.recorded)
  return None if text is None else _convert(record, link.recorded, text, kind)


def changed_fields(config):
  """Names of the fields of `config` that differ from the class's defaults: what a caller
  that builds a config in code (not from flags) gave."""
  defaults = type(config)()
  return frozenset(field.name for field in dataclasses.fields(config)
                   if getattr(config, field.name) != getattr(defaults, field.name))


def _differs_line(record, differing):
  return ('given flags differ from the run\'s record %s: %s' % (record.path, ', '.join(
      '--%s=%s (the run: %s)' % (link.name, value, 'unset' if recorded is None
                                 else '--%s=%s' % (link.recorded, recorded))
      for link, value, recorded in differing)))


def _check_dir(record, link, value):
  require(os.path.isdir(value), '--%s is needed: the run\'s record %s names --%s=%s, which '
          'no longer exists (a moved run?); give --%s=DIR' % (
              link.name, record.path, link.recorded, value, link.name))


def no_record(config, given, links):
  """Settings of a run without a record: each linked field the flag's or the default."""
  return Settings(None, tuple(
      Setting(link.name, getattr(config, link.name), FLAG if link.name in given else DEFAULT)
      for link in links))


def fill_from_record(config, given, record, links):
  """-> (config with the record's values where the user gave no flag, Settings).

  Args:
    config: a frozen config dataclass, built from flags.
    given: names of its fields given explicitly (`core.params.given_flags`).
    record: RunRecord or None (then config is returned unchanged).
    links: Links from training flags to the config's fields.
  Raises:
    ConfigError: a recorded directory no longer exists and its flag was not given.
    DataError: a record value that is not of its flag's type.
  """
  if record is None:
    return config, no_record(config, given, links)
  hints = typing.get_type_hints(type(config))
  changes, entries, differing = {}, [], []
  for link in links:
    recorded = _recorded_value(record, link, _unwrap(hints[link.name]))
    value = getattr(config, link.name)
    if link.name in given:
      if value != recorded:
        differing.append((link, value, recorded))
      entries.append(Setting(link.name, value, FLAG))
    elif recorded is None or given & set(link.unless):
      entries.append(Setting(link.name, value, DEFAULT))
    else:
      if link.is_dir:
        _check_dir(record, link, recorded)
      changes[link.name] = recorded
      entries.append(Setting(link.name, recorded, RECORD, link.recorded))
  if differing:
    logging.warning('%s', _differs_line(record, differing))
  return dataclasses.replace(config, **changes), Settings(record, tuple(entries))
