"""The tests' sessions run with TensorFlow's graph optimizer (grappler) off.

Why: grappler rewrites each new graph on its first run, and for the tests' graphs, built to
run a few steps, that rewrite costs more than the steps: a 2-clone I3D trained for 2 steps
and evaluated twice took 25 s with it and 17 s without (tests/evaluation/test_video_eval.py,
2026-11-27). The product asks nothing of grappler (its mixed precision and XLA are its own
graph rewrites; deployment/xla.py turns grappler's remapper off), so the tests check the same
graphs, run unrewritten.

What keeps grappler on: tests marked `grappler` (those that read a traced step, which
shows what grappler rewrote, and XLA's), the `timing` tests (their figures are a user's),
processes that start fresh (tests/prestarted.py) and `SLIMDEPLOY_TESTS_GRAPPLER=1` for a
whole run.
tests/test_graph_optimizer.py runs the trainer and evaluation both ways and compares.

Sessions are patched in the pytest process (tests/conftest.py) and in each forked entry
(tests/prestarted.py); the variable is read as each session is created, so a marked test's
forked processes keep grappler too.
"""

import os

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as session_lib

ENV = 'SLIMDEPLOY_TESTS_GRAPPLER'
_ORIGINAL = session_lib.BaseSession.__init__


def install():
  """Every session created from now on in this process, unless ENV is '1'."""
  session_lib.BaseSession.__init__ = _init


def without_grappler(config):
  """A copy of the ConfigProto (None: the process's default, as BaseSession reads it)."""
  from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel
  copy = config_pb2.ConfigProto()
  copy.CopyFrom(context.context().config if config is None else config)
  copy.graph_options.rewrite_options.disable_meta_optimizer = True
  return copy


def _init(self, target='', graph=None, config=None):
  if os.environ.get(ENV) != '1' and isinstance(config, (config_pb2.ConfigProto, type(None))):
    config = without_grappler(config)
  _ORIGINAL(self, target, graph, config)
