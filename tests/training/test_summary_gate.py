"""training/summary_gate.py: the summaries behind a switch give what the summary op gives,
run nothing when not written, keep each tensor's device, and leave what they cannot copy."""

import pytest

from tf_compat import tf
from training import summary_gate, train
from training.config import TrainConfig
from training.setup import check_train_config
from training.summary_gate import SummaryGate, Ungated

SUMMARY_TYPES = {'HistogramSummary', 'ScalarSummary', 'MergeSummary'}


def _graph():
  """A step drawing batches from an iterator (and adding up the losses: the summarized
  tensors do not race with an update in the same run), and summaries of its activation,
  sparsity (slim's zero_fraction: a v1 cond), a constant, a variable and the loss."""
  graph = tf.Graph()
  with graph.as_default():
    data = tf.data.Dataset.range(100).map(lambda i: tf.fill([4, 3], tf.cast(i, tf.float32)))
    x = tf.data.make_one_shot_iterator(data).get_next()
    weights = tf.Variable(tf.ones([3, 2]), name='weights')
    y = tf.matmul(x, weights)
    loss = tf.reduce_mean(y)
    step = tf.Variable(0.0, name='total').assign_add(loss).op
    merged = tf.summary.merge([
        tf.summary.histogram('activation', y),
        tf.summary.scalar('sparsity', tf.nn.zero_fraction(y)),
        tf.summary.scalar('constant', tf.constant(3.0)),
        tf.summary.histogram('weight_values', weights),
        tf.summary.scalar('loss', loss)])
    gated = summary_gate.gate(merged, [step, loss])
    init = tf.global_variables_initializer()
  return graph, step, loss, merged, gated, init


WRITES = (True, False, True)


def test_the_gate_gives_the_summary_ops_value_of_the_steps_own_batch():
  """Run against run: the ungated op fetched on the steps that write (the way before), and
  the gate fetched at every step; the same bytes, the middle step b''."""
  graph, step, loss, merged, _, init = _graph()
  with tf.Session(graph=graph) as sess:
    sess.run(init)
    before = [sess.run([step, loss, merged])[2] if write else sess.run([step, loss]) and b''
              for write in WRITES]
  graph, step, loss, _, gated, init = _graph()
  assert isinstance(gated, SummaryGate)
  with tf.Session(graph=graph) as sess:
    sess.run(init)
    after = [sess.run([step, loss] + gated.fetches(write), feed_dict=gated.feed(write))[2]
             for write in WRITES]
  assert after == before and after[1] == b''
  assert [value.tag for value in tf.Summary.FromString(after[2]).value] == [
      'activation', 'sparsity', 'constant', 'weight_values', 'loss']


def _ran(sess, graph, fetches, feed):
  """Types of the graph's ops the run executed (Grappler's own nodes left out)."""
  metadata = tf.RunMetadata()
  sess.run(fetches, feed_dict=feed, run_metadata=metadata,
           options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
  names = {node.node_name for device in metadata.step_stats.dev_stats
           for node in device.node_stats}
  ops = {op.name: op for op in graph.get_operations()}
  return [ops[name] for name in names if name in ops]


def test_a_step_that_does_not_write_runs_none_of_the_summaries_ops():
  graph, step, loss, _, gated, init = _graph()
  copies = [op for op in graph.get_operations() if op.name.startswith('gated_summaries/')]
  with tf.Session(graph=graph) as sess:
    sess.run(init)
    quiet = _ran(sess, graph, [step, loss] + gated.fetches(False), gated.feed(False))
    written = _ran(sess, graph, [step, loss] + gated.fetches(True), gated.feed(True))
  assert {op.type for op in quiet if op in copies} <= {'Switch', 'Merge', 'Const',
                                                       'PlaceholderWithDefault'}
  assert SUMMARY_TYPES <= {op.type for op in written if op in copies}
  # Sparsity's count (in its cond) ran on the written step only.
  assert not any('count_nonzero' in op.name for op in quiet if op in copies)
  assert any('count_nonzero' in op.name for op in written if op in copies)


def test_each_switch_is_on_its_tensors_device_and_copies_keep_theirs():
  """Built, not run: a step on /device:GPU:0 sends no activation to the host unless the
  summaries are written (each switch sits by its tensor)."""
  graph = tf.Graph()
  with graph.as_default():
    with tf.device('/device:GPU:0'):
      weights = tf.Variable(tf.ones([3, 2]), name='weights')
      y = tf.matmul(tf.ones([4, 3]), weights)
      step = tf.reduce_sum(y)
    unplaced = tf.reduce_max(y)  # left to the placer: its switch too, not on the CPU
    with tf.device('/device:CPU:0'):
      merged = tf.summary.merge([tf.summary.histogram('activation', y),
                                 tf.summary.scalar('largest', unplaced)])
      gated = summary_gate.gate(merged, [step, unplaced])
  switches = [op for op in graph.get_operations()
              if op.type == 'Switch' and op.inputs[0].op is y.op]
  assert [op.device for op in switches] == ['/device:GPU:0']
  assert switches[0].colocation_groups() == [b'loc:@' + y.op.name.encode()]
  unplaced_switch, = [op for op in graph.get_operations()
                      if op.type == 'Switch' and op.inputs[0].op is unplaced.op]
  assert unplaced_switch.device == ''
  assert unplaced_switch.colocation_groups() == [b'loc:@' + unplaced.op.name.encode()]
  histograms = [op for op in graph.get_operations() if op.type == 'HistogramSummary']
  assert sorted(op.device for op in histograms) == ['/device:CPU:0'] * 2  # and its copy
  assert isinstance(gated, SummaryGate)


def test_a_variable_only_the_summaries_read_is_not_made_again():
  graph = tf.Graph()
  with graph.as_default():
    seen = tf.Variable(1.0, name='seen_by_summaries_only')
    step = tf.constant(1.0) + 1
    merged = tf.summary.merge([tf.summary.scalar('seen', seen)])
    gated = summary_gate.gate(merged, [step])
    init = tf.global_variables_initializer()
  assert [op.name for op in graph.get_operations() if op.type == 'VariableV2'] == [
      'seen_by_summaries_only']
  with tf.Session(graph=graph) as sess:
    sess.run(init)
    value = sess.run(gated.value, feed_dict=gated.feed(True))
  assert tf.Summary.FromString(value).value[0].simple_value == 1.0


@pytest.mark.parametrize('kind', ['while_loop', 'xla'])
def test_summaries_it_cannot_copy_stay_ungated(kind):
  """A while loop's frame would be entered twice under one name, an XLA-marked op compiled
  apart: those summary ops are fetched as before, by the steps that write."""
  graph = tf.Graph()
  with graph.as_default():
    step = tf.constant(2.0) * 3
    if kind == 'while_loop':
      value = tf.while_loop(lambda i: i < 10.0, lambda i: i + step, [step])
    else:
      with tf.get_default_graph()._attr_scope(  # pylint: disable=protected-access
          {'_XlaCompile': tf.AttrValue(b=True)}):
        value = step * 2
    merged = tf.summary.merge([tf.summary.scalar('value', value)])
    gated = summary_gate.gate(merged, [step])
  assert isinstance(gated, Ungated)
  assert gated.fetches(False) == [] and gated.fetches(True) == [merged]
  assert gated.feed(True) == {}


def test_the_trainers_graph_with_every_summary_is_gated(digits_dir, tmp_path):
  """Two clones with activation (their sparsity's conds) and gradient summaries."""
  setup = check_train_config(TrainConfig(
      dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
      train_dir=str(tmp_path / 'train'), num_clones=2, clone_on_cpu=True,
      summarize_activations=True, summarize_gradients=True))
  with tf.Graph().as_default():
    graph = train.build_training_graph(setup)
  assert isinstance(graph.summaries, SummaryGate)
