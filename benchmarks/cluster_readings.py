"""What benchmarks.cluster reads from a run: the chief's progress lines (its timeline and
the measured window after warm-up), each worker's examples/sec lines, every task's CPU
seconds from /proc/<pid>/stat (`CpuSampler`), and the machine's and this process's CPU
seconds, from which a run's `other_cores` (work outside the benchmark) follows.
"""

import datetime
import os
import re
import threading
import time

__all__ = ['LINE', 'WORKER_RATE', 'chief_timeline', 'job_window', 'CpuSampler',
           'busy_cpu_secs', 'own_cpu_secs']

LINE = re.compile(r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*\] step (\d+)(?: of \d+)?: loss = ', re.M)
WORKER_RATE = re.compile(r'\] step (\d+)(?: of \d+)?: loss = \S+ \(([\d.]+) examples/sec', re.M)


def chief_timeline(text):
  """[(seconds, global step)] of the chief's progress lines, across midnight."""
  timeline, offset, previous = [], 0.0, None
  for hours, minutes, seconds, step in LINE.findall(text):
    t = int(hours) * 3600 + int(minutes) * 60 + float(seconds) + offset
    if previous is not None and t < previous:
      offset += 86400
      t += 86400
    timeline.append((t, int(step)))
    previous = t
  return timeline


def job_window(text, warmup_steps):
  """((t0, s0), (t1, s1)): the chief's first progress line after warm-up and its last,
  in seconds since the local midnight of its first line, and their global steps."""
  points = [(t, s) for t, s in chief_timeline(text) if s >= warmup_steps]
  if len(points) < 2:
    raise RuntimeError('too few progress lines after warm-up in the chief log')
  return points[0], points[-1]


class CpuSampler:
  """Samples every task's CPU seconds (utime + stime of /proc/<pid>/stat: all its
  threads) every `period` seconds in a thread, so the CPU a task spent between two
  moments of the chief's log is known (`between`). launch_local's namespace wrapper
  (nsenter) execs the command, so a task's pid is its trainer's."""

  def __init__(self, cluster, period=0.25):
    self._cluster, self._period = cluster, period
    self._samples = []  # (seconds since the local midnight of the start, {name: cpu})
    self._midnight = datetime.datetime.combine(datetime.date.today(),
                                               datetime.time()).timestamp()
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc_info):
    self._stop.set()
    self._thread.join()

  def _run(self):
    ticks = os.sysconf('SC_CLK_TCK')
    while not self._stop.wait(self._period):
      cpu = {}
      for task in self._cluster.tasks:
        try:
          with open('/proc/%d/stat' % task.process.pid) as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
          cpu[task.name] = (int(fields[11]) + int(fields[12])) / ticks
        except (AttributeError, OSError, IndexError, ValueError):
          continue
      self._samples.append((time.time() - self._midnight, cpu))

  def between(self, name, t0, t1):
    """CPU seconds task `name` spent from t0 to t1 (seconds since that midnight)."""
    return self._at(name, t1) - self._at(name, t0)

  def _at(self, name, when):
    points = [(t, cpu[name]) for t, cpu in self._samples if name in cpu]
    before = [p for p in points if p[0] <= when][-1:] or points[:1]
    after = [p for p in points if p[0] >= when][:1] or points[-1:]
    (ta, ca), (tb, cb) = before[0], after[0]
    return ca if tb <= ta else ca + (cb - ca) * (when - ta) / (tb - ta)


def busy_cpu_secs():
  """CPU seconds spent by every process on the machine since boot (/proc/stat)."""
  with open('/proc/stat') as stat:
    fields = [int(v) for v in stat.readline().split()[1:]]
  idle = fields[3] + fields[4]   # idle + iowait
  return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


def own_cpu_secs():
  """CPU seconds of this process and its waited-for children (the cluster's tasks)."""
  times = os.times()
  return times.user + times.system + times.children_user + times.children_system
