"""Fixtures of the deployment tests."""

import socket

import pytest


@pytest.fixture
def held_port():
  """A port of 127.0.0.1 held by a listening socket, as a leftover task holds it."""
  holder = socket.socket()
  holder.bind(('127.0.0.1', 0))
  holder.listen()
  yield holder.getsockname()[1]
  holder.close()
