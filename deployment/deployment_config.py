"""Where a deployment puts things: `DeploymentConfig`, validated on construction, then
answering device questions only (slim's class; `deployment.model_deploy` re-exports it).

Placement
    * Clone i: `/job:worker/task:R/device:GPU:i` with ps tasks, `/device:GPU:i` without; with
      `clone_on_cpu` clone i runs on logical CPU device i (`/device:CPU:i`), so create the
      session with as many CPU devices as clones (`session_config.make_session_config`).
    * Variables: on the worker's CPU without ps tasks; with ps tasks, each on the
      `/job:ps/task:t/device:CPU:0` holding the fewest bytes so far. Resource
      (`VarHandleOp`) and ref (`VariableV2`) variables alike, however created
      (`clone_device_fn`, the device function of the ops inside one clone).
    * Inputs, the optimizer and summaries: the worker's CPU.
    * `variable_update='replicated'`: each clone keeps its own copy of the variables on its
      own device (clone 0's under today's names, clone i's under `clone_i/`), and the
      clones' gradients are all-reduced (`deployment.replicated`); with several workers
      and no ps tasks every clone of every worker is in one all-reduce group, and each
      worker's devices are `/job:worker/task:R/...`. The global step stays on the
      worker's CPU.
"""

import math
import numbers
import weakref

from tf_compat import tf

__all__ = ['DeploymentConfig', 'clone_device_fn', 'VARIABLE_OP_TYPES', 'SUMMARY_OP_TYPES',
           'VARIABLE_UPDATES']

# tf_cnn_benchmarks' names: parameter_server (slim's model_deploy: one copy, the clones'
# gradients summed on one device, ps tasks across machines), replicated (a copy per clone,
# gradients all-reduced; across workers without ps, one group of every clone).
VARIABLE_UPDATES = ('parameter_server', 'replicated')

# Op types that own variable storage; resource variables are VarHandleOp in TF 2.
VARIABLE_OP_TYPES = frozenset([
    'Variable', 'VariableV2', 'VarHandleOp', 'AutoReloadVariable',
    'MutableHashTable', 'MutableHashTableV2', 'MutableHashTableOfTensors',
    'MutableHashTableOfTensorsV2', 'MutableDenseHashTable', 'MutableDenseHashTableV2'])

SUMMARY_OP_TYPES = frozenset([
    'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary', 'AudioSummaryV2',
    'TensorSummary', 'TensorSummaryV2', 'MergeSummary', 'WriteSummary',
    'WriteScalarSummary', 'WriteHistogramSummary', 'WriteImageSummary'])


def _op_type(op):
  return op.type if isinstance(op, tf.Operation) else op.op


class DeploymentConfig:
  """Where clones, variables, inputs and the optimizer go. Validated on construction.

  Args:
    num_clones: model copies per worker (>= 1).
    clone_on_cpu: put clone i on logical CPU device i instead of GPU i.
    replica_id: this worker's index, 0 <= replica_id < num_replicas.
    num_replicas: number of worker processes (>= 1).
    num_ps_tasks: number of parameter-server tasks (>= 0); required when num_replicas > 1.
    worker_job_name: the workers' job name in the cluster.
    ps_job_name: the parameter servers' job name in the cluster.
    variable_update: one of VARIABLE_UPDATES; 'replicated' needs num_ps_tasks=0, and
      num_replicas > 1 without ps tasks needs 'replicated'.
    gradient_repacking: with 'replicated', the number of flat tensors the gradients are
      packed into before the all-reduce (>= 1; tf_cnn_benchmarks' --gradient_repacking).

  Raises:
    ValueError naming the argument, the value and what would be accepted.
  """

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1,
               num_ps_tasks=0, worker_job_name='worker', ps_job_name='ps',
               variable_update='parameter_server', gradient_repacking=1):
    _check_int('num_clones', num_clones, minimum=1)
    _check_int('num_replicas', num_replicas, minimum=1)
    _check_int('num_ps_tasks', num_ps_tasks, minimum=0)
    _check_int('replica_id', replica_id, minimum=0)
    if replica_id >= num_replicas:
      raise ValueError('replica_id=%d must be less than num_replicas=%d'
                       % (replica_id, num_replicas))
    _check_int('gradient_repacking', gradient_repacking, minimum=1)
    _check_variable_update(variable_update, num_replicas, num_ps_tasks)
    if num_replicas > 1 or num_ps_tasks > 0:
      if not worker_job_name:
        raise ValueError("worker_job_name is empty: a job name such as 'worker' is "
                         'required when num_replicas > 1 or num_ps_tasks > 0')
      if not ps_job_name:
        raise ValueError("ps_job_name is empty: a job name such as 'ps' is required "
                         'when num_replicas > 1 or num_ps_tasks > 0')
    self._num_clones = int(num_clones)
    self._clone_on_cpu = bool(clone_on_cpu)
    self._replica_id = int(replica_id)
    self._num_replicas = int(num_replicas)
    self._num_ps_tasks = int(num_ps_tasks)
    self._variable_update = variable_update
    self._gradient_repacking = int(gradient_repacking)
    self._ps_device = '/job:' + ps_job_name if num_ps_tasks > 0 else ''
    # One chooser per graph, so every variable of a graph (global step, shared and
    # per-clone variables alike) is balanced with the others, in creation order.
    self._choosers = weakref.WeakKeyDictionary()
    in_cluster = num_ps_tasks > 0 or num_replicas > 1
    self._worker_device = '/job:' + worker_job_name if in_cluster else ''

  num_clones = property(lambda self: self._num_clones)
  clone_on_cpu = property(lambda self: self._clone_on_cpu)
  replica_id = property(lambda self: self._replica_id)
  num_replicas = property(lambda self: self._num_replicas)
  num_ps_tasks = property(lambda self: self._num_ps_tasks)
  ps_device = property(lambda self: self._ps_device)
  worker_device = property(lambda self: self._worker_device)
  variable_update = property(lambda self: self._variable_update)
  gradient_repacking = property(lambda self: self._gradient_repacking)
  replicated = property(lambda self: self._variable_update == 'replicated')

  def __repr__(self):
    return ('DeploymentConfig(num_clones=%d, clone_on_cpu=%s, replica_id=%d, '
            'num_replicas=%d, num_ps_tasks=%d, variable_update=%r)' % (
                self._num_clones, self._clone_on_cpu, self._replica_id,
                self._num_replicas, self._num_ps_tasks, self._variable_update))

  def _worker_prefix(self):
    """`/job:worker/task:R` in a cluster (the task keeps replicas apart), else ''."""
    if self._worker_device:
      return '%s/task:%d' % (self._worker_device, self._replica_id)
    return ''

  def all_reduce_group_size(self):
    """Devices in the gradients' all-reduce: every clone of every worker."""
    return self._num_clones * self._num_replicas

  def all_reduce_hint(self):
    """'nccl' between GPUs (CollectiveReduce's NCCL kernels), 'ring' between CPUs."""
    return 'ring' if self._clone_on_cpu else 'nccl'

  def clone_variables_device(self, clone_index):
    """Where clone `clone_index` keeps its variables: its own device when replicated,
    else `variables_device()` (shared by every clone)."""
    if self.replicated:
      return self.clone_device(clone_index)
    return self.variables_device()

  def caching_device(self):
    """Caches variable reads on the reading worker when variables live on ps tasks."""
    if self._num_ps_tasks > 0:
      return lambda op: op.device
    return None

  def _check_clone_index(self, clone_index):
    if (isinstance(clone_index, bool) or not isinstance(clone_index, numbers.Integral)
        or not 0 <= clone_index < self._num_clones):
      raise ValueError('clone_index=%r must be an integer in [0, num_clones=%d)'
                       % (clone_index, self._num_clones))

  def clone_device(self, clone_index):
    """Device string for clone `clone_index` (0 <= clone_index < num_clones)."""
    self._check_clone_index(clone_index)
    kind = 'CPU' if self._clone_on_cpu else 'GPU'
    return '%s/device:%s:%d' % (self._worker_prefix(), kind, clone_index)

  def clone_scope(self, clone_index):
    """Name scope of clone `clone_index`: 'clone_i', or '' with a single clone."""
    self._check_clone_index(clone_index)
    return 'clone_%d' % clone_index if self._num_clones > 1 else ''

  def optimizer_device(self):
    """The worker's CPU: gradient sums and the update are cheap and avoid GPU copies."""
    return self._worker_prefix() + '/device:CPU:0'

  def inputs_device(self):
    """The worker's CPU: input pipelines must never compete with the model for a GPU."""
    return self._worker_prefix() + '/device:CPU:0'

  def variables_device(self):
    """A device string, or with ps tasks a function balancing variables by bytes.

    The function is the same for every call within one graph (the default graph at the
    time of the call), so the balance holds across calls.
    """
    if self._num_ps_tasks == 0:
      return self._worker_prefix() + '/device:CPU:0'
    graph = tf.get_default_graph()
    if graph not in self._choosers:
      self._choosers[graph] = _BalancedVariableChooser(self._ps_device, self._num_ps_tasks)
    return self._choosers[graph]

  def summary_device(self):
    """Summaries are CPU-only kernels: always the worker's CPU."""
    return self._worker_prefix() + '/device:CPU:0'


def _check_variable_update(variable_update, num_replicas, num_ps_tasks):
  if variable_update not in VARIABLE_UPDATES:
    raise ValueError('variable_update=%r is not known; valid: %s'
                     % (variable_update, ', '.join(VARIABLE_UPDATES)))
  if variable_update == 'replicated' and num_ps_tasks > 0:
    raise ValueError("variable_update='replicated' keeps every variable on the workers' "
                     'devices: num_ps_tasks=%d must be 0 (or use '
                     "variable_update='parameter_server')" % num_ps_tasks)
  if num_replicas > 1 and num_ps_tasks < 1 and variable_update != 'replicated':
    raise ValueError("num_ps_tasks=0 with num_replicas=%d: workers without parameter "
                     "servers all-reduce their gradients, which needs "
                     "variable_update='replicated'; or num_ps_tasks >= 1" % num_replicas)


def _check_int(name, value, minimum):
  if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
      or value < minimum):
    raise ValueError('%s=%r must be an integer >= %d' % (name, value, minimum))


class _BalancedVariableChooser:
  """Each variable op to the ps task with the fewest bytes so far (ties: the lowest; an
  unknown size counts 1), as TF's greedy load balancing by byte size; other ops keep their
  device. slim's round robin put every weight of LeNet, CifarNet and I3D on one of 2 ps
  tasks (their layers make 2 or 4 variables; docs/cluster.md). Workers build the same
  graph in the same order, so they all compute the same placement."""

  def __init__(self, ps_device, num_tasks):
    self._ps_device = ps_device
    self._loads = [0] * num_tasks

  def __call__(self, op):
    if _op_type(op) not in VARIABLE_OP_TYPES:
      return op.device
    node = op.node_def if isinstance(op, tf.Operation) else op
    shape, task = node.attr['shape'].shape, self._loads.index(min(self._loads))
    known = 'dtype' in node.attr and not shape.unknown_rank and min(
        [d.size for d in shape.dim] or [0]) >= 0
    self._loads[task] += max(1, known and tf.as_dtype(node.attr['dtype'].type).size *
                             math.prod(d.size for d in shape.dim))
    return '%s/task:%d/device:CPU:0' % (self._ps_device, task)


def clone_device_fn(config, clone_index):
  """Device function for ops built inside clone `clone_index`.

  Variable ops go to `clone_variables_device(clone_index)` however they are created (slim, tf.layers or
  tf.get_variable, ref or resource); summary ops go to the CPU; an op that model_fn
  placed itself (a `tf.device` inside model_fn, applied before this function) keeps its
  device; everything else goes to the clone's device.
  """
  clone_device = config.clone_device(clone_index)
  variables_device = config.clone_variables_device(clone_index)
  summary_device = config.summary_device()

  def device_fn(op):
    op_type = _op_type(op)
    if op_type in VARIABLE_OP_TYPES:
      return variables_device(op) if callable(variables_device) else variables_device
    if op_type in SUMMARY_OP_TYPES:
      return summary_device
    return op.device or clone_device
  return device_fn
