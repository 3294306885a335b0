"""The Python heap around a step loop: what was built before it, frozen out of the collector.

A process that has built a TensorFlow graph holds millions of Python objects (TensorFlow's
modules, the graph's ops and tensors). Each full pass of Python's cyclic collector walks
all of them: in the clip pipeline's benchmark the session loop spent about 5 % of the
machine's CPU there, in passes of a tenth of a second during which the loop issues no
step (docs/benchmarks.md, issue 23). `frozen()` moves every object alive into the
collector's permanent generation (`gc.freeze`) for the loop; what the loop allocates is
still collected. It does not collect first: a full pass costs 0.2 s here and the timing
harness enters the block once per measurement; garbage frozen with the rest is collected
after the block.
"""

import contextlib
import gc

__all__ = ['frozen']


@contextlib.contextmanager
def frozen():
  """Within the block, the objects alive at its start are never examined by the cyclic
  collector (they are still freed by reference counting); at its end they are again."""
  gc.freeze()
  try:
    yield
  finally:
    gc.unfreeze()
