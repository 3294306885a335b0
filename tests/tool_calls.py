"""A tool's command line run in the test's own process, as the tool's `main` runs it.

    status, result = tool_calls.call(ImageConversion, ['--dataset_name=digits', ...],
                                     convert_images.convert_images)

The config comes from the flags as the tool parses them (core.params.config_from_argv:
flagfiles, bad values and positional arguments included), `work(config)` is the library
call the tool's `main` makes, and an expected error is reported as `main` reports it
(core.errors.report: its one `error:` line on stderr, read with capsys, and its status).
What `main` adds on top (the summary it prints, INCOMPLETE for skipped input, its line for
an output that cannot be written) each test states; each tool's own process is started
once, by its contract test.
"""

from core.errors import EXPECTED, OK, report
from core.params import config_from_argv

__all__ = ['call']


def call(config_class, argv, work):
  """-> (status, what `work(config)` returned, or None after a reported error)."""
  try:
    config, _ = config_from_argv(config_class, argv)
    return OK, work(config)
  except EXPECTED as error:
    return report(error), None
