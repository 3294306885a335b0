"""The training step's summaries behind a switch: one executor for steps with and without.

TensorFlow builds an executor, and runs Grappler over the graph it prunes, for every
distinct set of fetches and feeds given to `Session.run`. A step that fetches the summary
op and a step that does not are two such sets: a run paid the graph's optimization twice
before its third step (a reduced I3D run on this 2-core CPU: its second step took 3.3-4.9
s, the later ones 0.1 s). `gate` gives one string tensor that is the summaries when its
`write` placeholder is fed True and b'' when fed False, so every step fetches and feeds
the same names.

When `write` is False the summaries' own ops do not run. They are copies of the ops only
the summaries need (histograms, norms, sparsity, the merge), made in the graph: each
tensor they take from the step (an activation, a gradient, a variable's value) passes a
`Switch` on `write` colocated with the op that makes it, so a step that does not write
sends no activation to the host, and each copy also waits on the switch of `write` itself
(ops fed by constants alone). A dead input is how TensorFlow's `tf.cond` skips a branch;
the copies are the branch. The original ops stay as they were, for whoever fetches them.

What is not copied, and taken as it is: ops without inputs (constants, variables, handles;
one that creates a resource must stay the one resource). Graphs whose summaries' own ops
hold a while loop or ops marked for XLA compilation stay `Ungated`: those runs build
two executors, as before.
"""

from tf_compat import tf

__all__ = ['SummaryGate', 'Ungated', 'gate']

# A v1 cond (slim's sparsity summaries hold one) copies as the dataflow it is; a while
# loop's frame would be entered twice under one name.
_LOOPS = frozenset(['Enter', 'RefEnter', 'Exit', 'RefExit', 'NextIteration',
                    'RefNextIteration', 'LoopCond'])
_XLA_ATTRS = frozenset(['_XlaCompile', '_XlaScope', '_XlaCluster'])


class SummaryGate:
  """`value`: the summaries (a serialized Summary) when `write` is fed True, else b''.

  Every step fetches `fetches(write)` with `feed(write)`: the same names either way.
  """

  def __init__(self, value, write):
    self.value, self.write = value, write

  def fetches(self, write):
    del write
    return [self.value]

  def feed(self, write):
    return {self.write: bool(write)}


class Ungated:
  """The summary op fetched only by the steps that write: a second executor."""

  def __init__(self, summary_op):
    self.value = summary_op

  def fetches(self, write):
    return [self.value] if write else []

  def feed(self, write):
    del write
    return {}


def _closure(roots):
  """Every op `roots` (tensors or ops) depend on, through data and control inputs."""
  seen = set()
  stack = [getattr(root, 'op', root) for root in roots]  # tensors, variables, ops
  while stack:
    op = stack.pop()
    if op not in seen:
      seen.add(op)
      stack.extend(tensor.op for tensor in op.inputs)
      stack.extend(op.control_inputs)
  return seen


def _gateable(ops):
  return not any(op.type in _LOOPS or not _XLA_ATTRS.isdisjoint(op.node_def.attr)
                 for op in ops)


def _in_order(ops):
  """`ops` with each op after the ops of `ops` it takes an input from (a v1 cond adds its
  switches after the ops that read them: creation order is not enough). No loops here:
  `_gateable` kept them out."""
  members, done, order = set(ops), set(), []
  for root in ops:
    stack = [(root, False)]
    while stack:
      op, expanded = stack.pop()
      if op in done:
        continue
      if expanded:
        done.add(op)
        order.append(op)
        continue
      stack.append((op, True))
      stack.extend((before, False) for before in
                   [tensor.op for tensor in op.inputs] + list(op.control_inputs)
                   if before in members and before not in done)
  return order


def _switched(tensor, write):
  """`tensor` when `write` is True, dead otherwise; colocated with `tensor`'s op (placed
  with it even when the graph left it to the placer)."""
  switch = tf.raw_ops.RefSwitch if tensor.dtype._is_ref_dtype else tf.raw_ops.Switch  # pylint: disable=protected-access
  with tensor.graph.name_scope(None), tensor.graph.colocate_with(tensor.op):
    return switch(data=tensor, pred=write, name='gated_summaries/switch')[1]


def _copy(op, inputs, controls):
  graph = op.graph
  with graph.control_dependencies(None), graph.control_dependencies(controls), \
      graph.device(op.device), graph.name_scope(None):
    return graph.create_op(op.type, inputs, [output.dtype for output in op.outputs],
                           name='gated_summaries/' + op.name, attrs=dict(op.node_def.attr),
                           op_def=op.op_def)


def _is_source(op):
  return not list(op.inputs) and not op.control_inputs


def gate(summary_op, step_fetches):
  """-> SummaryGate of `summary_op`, or Ungated when its own ops cannot be gated.

  Args:
    summary_op: the merged summary tensor (or op) of the training graph.
    step_fetches: the tensors and ops every step runs anyway (the train op, the extras):
      whatever the summaries take from them is the step's, computed once.
  """
  summary = summary_op if isinstance(summary_op, tf.Tensor) else summary_op.outputs[0]
  graph = summary.graph
  step_ops = _closure(step_fetches)
  needed = _closure([summary])
  own = [op for op in graph.get_operations()
         if op in needed and op not in step_ops and not _is_source(op)]
  if not _gateable(own):
    return Ungated(summary_op)
  own = _in_order(own)
  with tf.name_scope('gated_summaries'):
    write = tf.placeholder_with_default(False, [], name='write')
    opened = tf.identity(tf.raw_ops.Switch(data=write, pred=write)[1], name='opened').op
  copies, switches = {}, {}

  def taken(tensor):
    if tensor.op in copies:
      return copies[tensor.op].outputs[tensor.value_index]
    if tensor.op in step_ops:
      if tensor not in switches:
        switches[tensor] = _switched(tensor, write)
      return switches[tensor]
    return tensor  # An op without inputs.

  for op in own:
    controls = [copies.get(control, control) for control in op.control_inputs]
    copies[op] = _copy(op, [taken(tensor) for tensor in op.inputs], controls + [opened])
  copied = taken(summary)
  with graph.name_scope(None), tf.device(summary.device), tf.name_scope('gated_summaries'):
    nothing = tf.raw_ops.Switch(data=tf.constant(b''), pred=write)[0]
    value = tf.raw_ops.Merge(inputs=[nothing, copied], name='value').output
  return SummaryGate(value, write)
