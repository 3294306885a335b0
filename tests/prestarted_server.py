"""Imported first by tests/prestarted.py's fork server: the server ends with the pytest
process that started it (the parent-death signal), and so do the LocalCluster tasks forked
from it (theirs is set for the server). Forked children do not inherit the setting."""

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1

ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
if os.getppid() == 1:  # The parent ended before the setting was made.
  os._exit(0)  # pylint: disable=protected-access
