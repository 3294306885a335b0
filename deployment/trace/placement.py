"""Where a deployment's clones really run: from a traced step, not from the flags.

Soft placement (on in every session config here) moves an op whose device does not exist
to one that does, without a word: clones asked for on `/device:GPU:1` of a machine with
one GPU, on a GPU of a machine with none, or on `/device:CPU:1` of a session declaring one
CPU device, all run on device 0 beside clone 0. The graph's device strings still say what
was asked; only the executed step says what happened. So:

    run_metadata = tf.RunMetadata()
    sess.run(train_op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    placements = clone_placement(run_metadata, deploy_config)
    for line in describe_placement(placements):
      logging.info(line)
    if shared_devices(placements): ...   # clones that run on one device

and `visible_devices(session_config)` lists what TensorFlow sees: the physical GPUs and
the logical devices a session created with that config has.
"""

import collections
import dataclasses
import re
from typing import Optional, Tuple

from tf_compat import tf

__all__ = ['VisibleDevices', 'ClonePlacement', 'visible_devices', 'clone_placement',
           'shared_devices', 'describe_placement', 'short_device']

# '/job:localhost/replica:0/task:0/device:GPU:0/stream:all' -> the device before '/stream'.
_DEVICE = re.compile(r'^(.*?/device:[^/:]+:\d+)')
_LOCAL_PREFIX = '/job:localhost/replica:0/task:0'


@dataclasses.dataclass(frozen=True)
class VisibleDevices:
  """What TensorFlow sees in this process.

  Attributes:
    physical_gpus: names of the physical GPUs ('/physical_device:GPU:0', ...); () on a
      machine without GPUs or with CUDA_VISIBLE_DEVICES empty.
    logical: (name, device_type) of every device a session with the config has, e.g.
      ('/job:localhost/replica:0/task:0/device:CPU:1', 'CPU').
  """
  physical_gpus: Tuple[str, ...]
  logical: Tuple[Tuple[str, str], ...]

  def count(self, device_type):
    """Logical devices of `device_type` ('CPU', 'GPU')."""
    return sum(1 for _, kind in self.logical if kind == device_type)


@dataclasses.dataclass(frozen=True)
class ClonePlacement:
  """Where one clone's ops ran in a traced step.

  Attributes:
    index: the clone's index i.
    scope: its name scope ('clone_i'; '' with a single clone, whose ops are then every
      op of the step).
    asked: the device the deployment asked for (`DeploymentConfig.clone_device(i)`).
    ops_by_device: {device: number of the clone's ops that ran there}, full device names,
      the parameter servers left out.
    device: the device where most of the clone's ops ran (its input, variable reads and
      summaries run on the CPU of the worker, the rest on the clone's device); None when
      the trace holds no op of the clone.
    ps_ops: the clone's ops that ran on a parameter server: its variables, their reads
      and updates, which belong there; not the clone's device, so not counted above.
  """
  index: int
  scope: str
  asked: str
  ops_by_device: dict
  device: Optional[str]
  ps_ops: int = 0


def visible_devices(session_config=None):
  """The physical GPUs and the devices of a session created with `session_config`.

  Creating the session is what tells: `device_count` and the GPU options of the config
  decide the logical devices. On a GPU machine it initializes the GPUs (with
  `gpu_options.allow_growth` it takes little memory).
  """
  gpus = tuple(device.name for device in tf.config.list_physical_devices('GPU'))
  with tf.Graph().as_default():
    with tf.Session(config=session_config) as sess:
      logical = tuple((device.name, device.device_type) for device in sess.list_devices())
  return VisibleDevices(gpus, logical)


def _node_devices(run_metadata):
  """{node name: set of devices} of a traced step; GPU stream entries count as their GPU."""
  devices = collections.defaultdict(set)
  for dev_stats in run_metadata.step_stats.dev_stats:
    match = _DEVICE.match(dev_stats.device)
    device = match.group(1) if match else dev_stats.device
    for node in dev_stats.node_stats:
      devices[node.node_name].add(device)
  return devices


def _on_ps(device, ps_device):
  """True if `device` ('/job:ps/replica:0/task:1/device:CPU:0') is a task of the ps job."""
  return bool(ps_device) and (device + '/').startswith(ps_device + '/')


def _in_scope(node_name, scope):
  """True if a path segment of the node name is the scope: grappler renames nodes with a
  prefix ('ConstantFolding/clone_1/...') but keeps the original path."""
  return not scope or scope in node_name.split('/')


def clone_placement(run_metadata, deploy_config):
  """Per clone of `deploy_config`, the devices its ops ran on in a traced step.

  Args:
    run_metadata: a `tf.RunMetadata` filled by one `session.run` with
      `tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)` of a graph built by
      `model_deploy.create_clones` (or `deploy`) with `deploy_config`.
    deploy_config: the `DeploymentConfig` the graph was built with; its `clone_scope(i)`
      names clone i's ops, its `ps_device` the parameter servers' job.

  Returns:
    A list of `ClonePlacement`, one per clone, in clone order. Ops on the parameter
    servers are counted apart (`ps_ops`): with one clone, which has no scope, they are
    every variable of the model with its reads and updates, and once outnumbered the
    model's compute so the clone seemed to run on the ps.
  """
  node_devices = _node_devices(run_metadata)
  placements = []
  for index in range(deploy_config.num_clones):
    scope = deploy_config.clone_scope(index)
    counts = collections.Counter(
        device for name, devices in node_devices.items() if _in_scope(name, scope)
        for device in devices)
    ps_ops = sum(count for device, count in counts.items()
                 if _on_ps(device, deploy_config.ps_device))
    counts = {device: count for device, count in counts.items()
              if not _on_ps(device, deploy_config.ps_device)}
    device = max(sorted(counts), key=counts.get) if counts else None
    placements.append(ClonePlacement(index, scope, deploy_config.clone_device(index),
                                     counts, device, ps_ops))
  return placements


def shared_devices(placements):
  """{device: (clone indices,)} of the devices on which more than one clone ran."""
  by_device = collections.defaultdict(list)
  for placement in placements:
    if placement.device is not None:
      by_device[placement.device].append(placement.index)
  return {device: tuple(indices) for device, indices in sorted(by_device.items())
          if len(indices) > 1}


def short_device(name):
  """'/job:localhost/replica:0/task:0/device:CPU:1' -> '/device:CPU:1'; other names as
  they are (a cluster's job and task stay)."""
  if name and name.startswith(_LOCAL_PREFIX + '/'):
    return name[len(_LOCAL_PREFIX):]
  return name


def describe_placement(placements):
  """One line per clone ('clone 1: asked /device:CPU:1, ran on /device:CPU:0 (40 of 52
  ops) SHARED with clone 0'; with parameter servers '... (86 of 86 ops; 42 more on the
  parameter servers: variables, reads, updates)'), for the log or a report."""
  shared = shared_devices(placements)
  lines = []
  for placement in placements:
    if placement.device is None:
      lines.append('clone %d: asked %s, no op of it in the trace%s'
                   % (placement.index, placement.asked,
                      ' but %d on the parameter servers' % placement.ps_ops
                      if placement.ps_ops else ''))
      continue
    counts = '%d of %d ops' % (placement.ops_by_device[placement.device],
                               sum(placement.ops_by_device.values()))
    if placement.ps_ops:
      counts += ('; %d more on the parameter servers: variables, reads, updates'
                 % placement.ps_ops)
    line = 'clone %d: asked %s, ran on %s (%s)' % (
        placement.index, placement.asked or '(no device)', short_device(placement.device),
        counts)
    others = [i for i in shared.get(placement.device, ()) if i != placement.index]
    if others:
      line += ' SHARED with clone %s' % ', '.join(str(i) for i in others)
    lines.append(line)
  return lines
