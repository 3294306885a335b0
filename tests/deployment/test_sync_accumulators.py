"""deployment.sync_accumulators in a local session, one process: what an update takes and
its record, against hand arithmetic. (Whole synchronous updates on real clusters:
test_sync_replicas.py.)"""

from deployment.sync_accumulators import (Accumulators, TraceLine, read_trace,
                                          record_per_worker, trace_op)
from tf_compat import tf

CPU = '/device:CPU:0'


def test_an_update_takes_the_mean_of_current_gradients_and_records_who_gave_them():
  with tf.Graph().as_default():
    var = tf.Variable([0.0, 0.0])
    accumulators = Accumulators(replicas_to_aggregate=2)
    grad = tf.placeholder(tf.float32, [2])
    label = tf.placeholder(tf.int64, [])
    worker = tf.placeholder(tf.int32, [])
    send, mean = accumulators.gradient(grad, var, label)
    record_sends, record = accumulators.record(worker, 3, label, CPU)
    counts, steps = record_per_worker(record)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(accumulators.set_global_step(tf.constant(4, tf.int64)))
      for index, values, step in [(0, [1.0, 2.0], 4), (2, [3.0, 6.0], 4),
                                  (1, [100.0, 100.0], 3)]:  # Worker 1's is stale: dropped.
        sess.run([send] + record_sends, {grad: values, label: step, worker: index})
      assert sess.run(accumulators.num_accumulated()).tolist() == [2, 2]
      taken, taken_counts, taken_steps = sess.run([mean, counts, steps])
  assert taken.tolist() == [2.0, 4.0]
  assert taken_counts.tolist() == [1, 0, 1]
  assert taken_steps.tolist() == [4, -1, 4]


def test_discard_empties_every_accumulator():
  with tf.Graph().as_default():
    var = tf.Variable([0.0])
    accumulators = Accumulators(replicas_to_aggregate=1)
    send, _ = accumulators.gradient(tf.constant([1.0]), var, tf.constant(0, tf.int64))
    record_sends, _ = accumulators.record(0, 2, tf.constant(0, tf.int64), CPU)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run([send] + record_sends)
      assert sess.run(accumulators.num_accumulated()).tolist() == [1, 1]
      sess.run(accumulators.discard())
      assert sess.run(accumulators.num_accumulated()).tolist() == [0, 0]


def test_the_trace_line_reads_back(tmp_path):
  path = str(tmp_path / 'trace')
  with tf.Graph().as_default():
    global_step = tf.Variable(8, dtype=tf.int64)  # After the update of step 7.
    record = (tf.constant([2.0, 0.0, 1.0], tf.float64), tf.constant([14.0, 0.0, 7.0],
                                                                    tf.float64))
    write = trace_op(record, global_step, path)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(write)
  with open(path, 'a') as trace:
    trace.write('something else\n')
  assert read_trace(path) == [TraceLine(7, [2, 0, 1], [7, -1, 7])]
