"""One way to write a duration in every progress line (training's ETA, evaluation's and
the converters' time left): short, and as precise as it is worth.

    duration(4.2) == '4.2s'   duration(59.6) == '1m00s'   duration(830) == '13m50s'
    duration(999960) == '277h46m'
"""

__all__ = ['duration']


def duration(seconds):
  """seconds (>= 0) as '4.2s', '37s', '13m50s' or '2h05m'."""
  if seconds < 9.95:
    return '%.1fs' % seconds
  seconds = int(round(seconds))
  if seconds >= 3600:
    return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)
  if seconds >= 60:
    return '%dm%02ds' % (seconds // 60, seconds % 60)
  return '%ds' % seconds
