"""What the sessions a test creates were configured with (the `session_configs` fixture
of tests/conftest.py)."""

import pytest
from tensorflow.python.client import session as session_lib

from tf_compat import tf


def record_sessions(monkeypatch):
  """Patches tf.Session; returns the list it fills with (graph, ConfigProto or None)."""
  recorded = []
  original = session_lib.Session.__init__

  def init(self, target='', graph=None, config=None):
    recorded.append((graph or tf.get_default_graph(), config))
    original(self, target=target, graph=graph, config=config)

  monkeypatch.setattr(session_lib.Session, '__init__', init)
  return recorded


def assert_gpu_options(recorded, allow_growth, memory_fraction):
  """There was a session, and every one was created with these GPU options."""
  assert recorded, 'no session was created'
  for _, config in recorded:
    assert config is not None, 'a session was created without a config'
    assert config.gpu_options.allow_growth is allow_growth
    assert config.gpu_options.per_process_gpu_memory_fraction == pytest.approx(
        memory_fraction)
