"""core.heap.frozen: the objects alive when the block starts are out of the collector's
passes inside it, and back in after it, even when the block raises."""

import gc

import pytest

from core import heap


class Cycle:
  def __init__(self):
    self.me = self


def test_objects_alive_at_the_start_are_frozen_inside_and_released_after():
  kept = Cycle()
  assert gc.get_freeze_count() == 0
  with heap.frozen():
    frozen = gc.get_freeze_count()
    assert frozen > 0 and not any(o is kept for o in gc.get_objects())
    Cycle()  # A cycle made inside is still collected.
    assert gc.collect() >= 1
  assert gc.get_freeze_count() == 0
  assert any(o is kept for o in gc.get_objects())


def test_a_block_that_raises_releases_them_too():
  with pytest.raises(RuntimeError), heap.frozen():
    raise RuntimeError('inside')
  assert gc.get_freeze_count() == 0
