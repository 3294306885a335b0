"""Runs in a converter's decoding process (tests/datasets/test_convert_videos.py): imports
nothing at the top, so what it reports is what the process itself imported."""

import sys


def process_view(_):
  """(the process's main module name, whether TensorFlow is imported), after importing
  what a decoding task imports."""
  from datasets.conversion import video_frames  # noqa: F401  (the import is the probe)
  main = sys.modules.get('__mp_main__') or sys.modules['__main__']
  return getattr(getattr(main, '__spec__', None), 'name', None), 'tensorflow' in sys.modules
