"""What one worker's training step moves over the network, read from a traced step.

In a cluster, every tensor that crosses tasks goes through gRPC's RecvTensor, and a
step traced with `FULL_TRACE` records each one on the receiving device: its size
(`requested_bytes`) and a label naming the edge, the sending and the receiving device
(`[6.0MB] [3.7Gb/s] edge_21_CifarNet/fc3/weights/read from /job:ps/replica:0/task:0/...
to /job:worker/replica:0/task:1/...`). The worker's own partition and every parameter
server's partition of that step are in its run metadata, so the step's traffic in both
directions is there:

    traffic = step_traffic(run_metadata, worker_index=1)
    traffic.received    # {'/job:ps/replica:0/task:0': bytes the worker received, ...}
    traffic.sent        # {'/job:ps/replica:0/task:0': bytes the parameter servers received}
    traffic.tensors     # {('received', 'CifarNet/fc3/weights/read'): bytes, ...}

These are tensor payloads: gRPC and TCP add their framing on the wire
(benchmarks/capacity.py measures both). Control edges (0 bytes) are left out. What a
parameter server received comes from that server's own records of the step, which a
trace does not always hold whole (seen: a first step's trace without one or both ps tasks'
records); `describe_traffic` says `not recorded` for a ps task the worker received from
but whose records of what it sent are absent, rather than a wrong 0.
"""

import collections
import dataclasses
import re

__all__ = ['StepTraffic', 'step_traffic', 'describe_traffic']

_EDGE = re.compile(r'edge_\d+_(\S+) from (/job:[^/]+/replica:\d+/task:\d+)\S* '
                   r'to (/job:[^/]+/replica:\d+/task:\d+)')


@dataclasses.dataclass(frozen=True)
class StepTraffic:
  """Bytes one worker's step moved, by peer task (`/job:ps/replica:0/task:k`)."""
  received: dict
  sent: dict
  tensors: dict

  @property
  def total_received(self):
    return sum(self.received.values())

  @property
  def total_sent(self):
    return sum(self.sent.values())


def step_traffic(run_metadata, worker_index, job='worker'):
  """The traffic of task `/job:<job>/replica:0/task:<worker_index>` in a traced step."""
  me = '/job:%s/replica:0/task:%d' % (job, worker_index)
  received, sent = collections.Counter(), collections.Counter()
  tensors = collections.Counter()
  for device in run_metadata.step_stats.dev_stats:
    for node in device.node_stats:
      match = _EDGE.search(node.timeline_label) if node.node_name == 'RecvTensor' else None
      if match is None or not node.output:
        continue
      size = node.output[0].tensor_description.allocation_description.requested_bytes
      tensor, source, target = match.groups()
      if size <= 0 or source == target or me not in (source, target):
        continue
      if target == me:
        received[source] += size
        tensors[('received', tensor)] += size
      else:
        sent[target] += size
        tensors[('sent', tensor)] += size
  return StepTraffic(dict(received), dict(sent), dict(tensors))


def _megabytes(count):
  return '%.2f MB' % (count / 1e6)


def describe_traffic(traffic):
  """One line: what the step received and sent, in total and per peer task."""
  def each(by_task, tasks):
    return ', '.join('%s %s' % (task.replace('/replica:0', '').lstrip('/'),
                                _megabytes(by_task[task]) if task in by_task
                                else 'not recorded')
                     for task in sorted(tasks))
  peers = set(traffic.received) | set(traffic.sent)
  return ('this step received %s (%s) and sent %s (%s); tensor payloads from the step\'s '
          'trace, without gRPC framing' % (
              _megabytes(traffic.total_received),
              each(traffic.received, traffic.received) or 'nothing',
              _megabytes(traffic.total_sent), each(traffic.sent, peers) or 'nothing'))
