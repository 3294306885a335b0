"""The errors a user can meet, and one table of exit statuses for every entry point and tool.

| status | name          | meaning                                                         |
|--------|---------------|-----------------------------------------------------------------|
| 0      | OK            | done (training also when stopped by SIGTERM: it saved first)    |
| 1      | BUG           | an unexpected error: Python's traceback; never returned on purpose |
| 2      | USAGE         | bad flags or configuration: one `error:` line naming the flag   |
| 3      | DATA          | damaged or unreadable data: a file that is not a readable video, a damaged record shard (with the command that rebuilds it), too many videos whose frames do not decode in training; one `error:` line naming the file (the converter's --strict stop too) |
| 4      | INCOMPLETE    | finished, but some input was left out (the converter skipped videos, listed in manifest.json; eval could not score some videos or images, listed in its report) |
| 5      | BELOW_TARGET  | a check the user asked for failed: accuracy below --min_accuracy, or --watch saw no checkpoint in time |
| 6      | IO            | the output could not be written: disk full, permission, read-only |
| 138    | CLUSTER       | a cluster task lost its parameter servers or peers, or timed out waiting for them; Kubeflow's TFJob retries it (user-defined retryable) |

A user mistake raises `ConfigError`, damaged data `DataError`; an entry's `main` hands either
(or an OSError while writing) to `report`, which prints the one `error:` line and returns
the status of this table, so every entry maps them the same way.
"""

import sys

__all__ = ['ConfigError', 'DataError', 'EXPECTED', 'OK', 'BUG', 'USAGE', 'DATA', 'INCOMPLETE',
           'BELOW_TARGET', 'IO', 'DIVERGED', 'CLUSTER', 'TABLE', 'TrainingDiverged', 'require',
           'print_error', 'report']


class ConfigError(ValueError):
  """A user mistake in the configuration: printed as one line, no traceback (status 2)."""


class DataError(Exception):
  """Data that cannot be read: the message names the file (or video) and how to mend it
  (status 3)."""


class TrainingDiverged(Exception):
  """Training's loss stopped being a number: the message names the step and the last
  checkpoint whose weights are finite (status 7)."""


def require(condition, message):
  """Raises ConfigError(message) unless `condition`: the one form of every config rule."""
  if not condition:
    raise ConfigError(message)


# What an entry's main catches and reports; anything else is a bug and keeps its traceback.
EXPECTED = (ConfigError, DataError, TrainingDiverged)

OK = 0
BUG = 1
USAGE = 2
DATA = 3
INCOMPLETE = 4
BELOW_TARGET = 5
IO = 6
DIVERGED = 7
CLUSTER = 138

TABLE = {OK: 'done', BUG: 'an unexpected error (traceback)', USAGE: 'bad flags or configuration',
         DATA: 'damaged or unreadable data', INCOMPLETE: 'finished, some input left out',
         BELOW_TARGET: 'a requested check failed', IO: 'output could not be written',
         DIVERGED: 'training diverged (the loss is not a number)',
         CLUSTER: 'the cluster failed around this task (retryable)'}


def print_error(message):
  """The one `error:` line on stderr every entry point prints before a non-zero status."""
  print('error: %s' % message, file=sys.stderr, flush=True)


def report(error):
  """Prints `error` as one line; returns its status: USAGE, DATA, DIVERGED, or IO for an
  OSError."""
  print_error(error)
  if isinstance(error, ConfigError):
    return USAGE
  if isinstance(error, DataError):
    return DATA
  if isinstance(error, TrainingDiverged):
    return DIVERGED
  if isinstance(error, OSError):
    return IO
  raise TypeError('%r has no exit status; let it raise' % (error,))
