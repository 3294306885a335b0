"""deployment.trace.traffic on run metadata built by hand (the labels gRPC's RecvTensor writes),
against sums done by hand. A real cluster's traffic line is checked against the
checkpoint's variable sizes in test_launch_local.py."""

from deployment.trace.traffic import describe_traffic, step_traffic
from tf_compat import tf

PS0 = '/job:ps/replica:0/task:0/device:CPU:0'
PS1 = '/job:ps/replica:0/task:1/device:CPU:0'
W1 = '/job:worker/replica:0/task:1/device:CPU:0'
W2 = '/job:worker/replica:0/task:2/device:CPU:0'


def _metadata(receives):
  """RunMetadata whose devices recorded RecvTensor (tensor, bytes, from, to)."""
  metadata = tf.RunMetadata()
  devices = {}
  for tensor, size, source, target in receives:
    if target not in devices:
      devices[target] = metadata.step_stats.dev_stats.add(device=target)
    node = devices[target].node_stats.add(node_name='RecvTensor')
    node.output.add().tensor_description.allocation_description.requested_bytes = size
    node.timeline_label = '[%dB] [1.0Gb/s] edge_%d_%s from %s to %s' % (
        size, len(tensor), tensor, source, target)
  local = devices[W1].node_stats.add(node_name='conv1/Conv2D')  # Not a transfer.
  local.timeline_label = 'conv1/Conv2D = Conv2D(a, b)'
  return metadata


def test_a_step_received_and_sent_by_peer_task():
  traffic = step_traffic(_metadata([
      ('net/fc/weights/read', 6000, PS0, W1), ('net/conv/weights/read', 400, PS1, W1),
      ('gradients/AddN_1', 6000, W1, PS0), ('gradients/conv_grad', 400, W1, PS1),
      ('net/ctrl', 0, PS0, W1),                       # A control edge: no bytes.
      ('net/fc/weights/read', 6000, PS0, W2),         # Another worker's step.
      ('read_1', 8, W1, PS0)]), worker_index=1)
  assert traffic.received == {'/job:ps/replica:0/task:0': 6000,
                              '/job:ps/replica:0/task:1': 400}
  assert traffic.sent == {'/job:ps/replica:0/task:0': 6008, '/job:ps/replica:0/task:1': 400}
  assert (traffic.total_received, traffic.total_sent) == (6400, 6408)
  assert traffic.tensors[('received', 'net/fc/weights/read')] == 6000
  assert describe_traffic(traffic) == (
      'this step received 0.01 MB (job:ps/task:0 0.01 MB, job:ps/task:1 0.00 MB) and sent '
      '0.01 MB (job:ps/task:0 0.01 MB, job:ps/task:1 0.00 MB); tensor payloads from the '
      'step\'s trace, without gRPC framing')


def test_a_parameter_servers_missing_records_are_named_not_counted_as_zero():
  traffic = step_traffic(_metadata([('w/read', 6000, PS0, W1), ('b/read', 400, PS1, W1),
                                    ('grad_b', 400, W1, PS1)]), worker_index=1)
  assert describe_traffic(traffic).split(' and sent ')[1].startswith(
      '0.00 MB (job:ps/task:0 not recorded, job:ps/task:1 0.00 MB)')


def test_a_single_process_step_moves_nothing():
  metadata = tf.RunMetadata()
  metadata.step_stats.dev_stats.add(device='/job:localhost/replica:0/task:0/device:CPU:0')
  traffic = step_traffic(metadata, worker_index=0)
  assert traffic.received == traffic.sent == {} and 'nothing' in describe_traffic(traffic)
