"""deployment.worker_stats: the counting ops in a local session, and the chief's figures
from two readings, against hand arithmetic. (The synchronous stale bit is checked on a
real cluster in test_sync_replicas.py and test_launch_local.py.)"""

import numpy as np
import pytest

from deployment.worker_stats import ClusterProgress, WorkerStats
from tf_compat import tf


def test_a_worker_counts_in_its_own_row_and_the_table_survives_a_second_init():
  with tf.Graph().as_default():
    variable = tf.Variable(0.0)
    train_op = variable.assign_add(1.0)
    stats = WorkerStats(3, 2, '/device:CPU:0')
    wrapped = stats.wrap(train_op)  # Asynchronous: a step, never stale.
    stale = tf.placeholder(tf.bool, [])
    counted = stats.count([train_op], stale=stale, counted=tf.constant(True))
    skipped = stats.count([train_op], stale=tf.constant(True), counted=tf.constant(False))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(stats.initializer)
      for _ in range(3):
        sess.run(wrapped)
      sess.run(counted, {stale: True})
      sess.run(counted, {stale: False})
      sess.run(skipped)
      # own_row is the row after the last count built (here `skipped`: adds nothing).
      assert sess.run(stats.own_row).tolist() == [5, 1]
      sess.run(stats.initializer)  # Initialized already (a restarted chief's): kept.
      np.testing.assert_array_equal(sess.run(stats.value), [[0, 0], [0, 0], [5, 1]])
      assert sess.run(variable) == 7.0  # Every counted run ran the train op once.


def test_a_worker_index_outside_the_cluster_is_refused():
  with tf.Graph().as_default(), pytest.raises(ValueError, match='worker_index=3'):
    WorkerStats(3, 3, '/device:CPU:0')


def test_synchronous_rates_and_stale_counts_from_two_readings():
  view = ClusterProgress(3, sync=True)
  assert view.report([[0, 0], [2, 0], [0, 0]], 100.0) == ({}, None)
  scalars, line = view.report([[10, 0], [12, 1], [5, 4]], 104.0)
  assert scalars == {'cluster/worker_0/steps_per_sec': 2.5,
                     'cluster/worker_1/steps_per_sec': 2.5,
                     'cluster/worker_2/steps_per_sec': 1.25,
                     'cluster/worker_0/steps': 10, 'cluster/worker_1/steps': 12,
                     'cluster/worker_2/steps': 5,
                     'cluster/worker_0/stale_gradients': 0,
                     'cluster/worker_1/stale_gradients': 1,
                     'cluster/worker_2/stale_gradients': 4,
                     'cluster/stale_gradients': 5}
  assert line == ('cluster: steps/sec by worker 0: 2.50, 1: 2.50, 2: 1.25; stale gradients '
                  'dropped: 5 (worker 1: 1, worker 2: 4)')
  scalars, line = view.report([[20, 0], [22, 1], [5, 4]], 106.0)
  assert scalars['cluster/worker_2/steps_per_sec'] == 0.0  # A stopped worker shows 0.
  assert scalars['cluster/worker_0/steps_per_sec'] == 5.0


def test_asynchronous_workers_show_rates_and_no_stale_count():
  view = ClusterProgress(2, sync=False)
  view.report([[0, 0], [0, 0]], 10.0)
  scalars, line = view.report([[4, 0], [6, 0]], 12.0)
  assert scalars == {'cluster/worker_0/steps_per_sec': 2.0,
                     'cluster/worker_1/steps_per_sec': 3.0,
                     'cluster/worker_0/steps': 4, 'cluster/worker_1/steps': 6}
  assert line == ('cluster: steps/sec by worker 0: 2.00, 1: 3.00 (asynchronous: every '
                  'gradient is applied, none dropped)')
