"""Shared fixtures for the network tests: every test builds in its own graph."""

import pytest

from tf_compat import tf


@pytest.fixture
def graph():
  """A fresh default graph, so variables and collections never leak across tests."""
  with tf.Graph().as_default() as g:
    yield g
