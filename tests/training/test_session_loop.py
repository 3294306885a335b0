"""training/session_loop.Watchdog on a fake clock: what it decides, and when; and the
loop's local init op of a synchronous job.

The loop itself runs in every training test (tests/training/test_train.py) and in the
cluster tests (tests/training/test_cluster_failures.py, tests/deployment/).
"""

import threading
import types

import pytest

from deployment import sync_replicas
from tf_compat import tf
from training import session_loop
from training.progress import ProgressLines, ProgressStep
from training.loop_parts import ClusterRole, LoopHooks
from training.session_loop import EXIT_CLUSTER_FAILURE, LoopTimeouts, Watchdog

TIMEOUTS = LoopTimeouts(startup_timeout_secs=10, step_timeout_secs=5, stop_grace_secs=2)


class Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def watchdog(timeouts=TIMEOUTS, is_chief=False, sync=True, absent_tasks=None):
  clock, stop = Clock(), threading.Event()
  return Watchdog(timeouts, ClusterRole(is_chief=is_chief, absent_tasks=absent_tasks),
                  LoopHooks(stop), sync, exit_fn=None, clock=clock), clock, stop


ABSENT = [('ps', 1, 'h0:2222'), ('worker', 0, 'h1:2222'), ('worker', 3, 'h4:2222')]


@pytest.mark.parametrize('is_chief, sync, advance, named', [
    # At start-up a worker waits for the parameter servers and the chief.
    (False, True, 11, 'ps 1 (h0:2222), the chief, worker 0 (h1:2222);'),
    # The chief waits for the parameter servers only.
    (True, True, 11, 'ps 1 (h0:2222);'),
    # A synchronous step waits for every worker; an asynchronous one for the ps only.
    (False, True, 'step', 'ps 1 (h0:2222), the chief, worker 0 (h1:2222), worker 3 (h4:2222);'),
    (False, False, 'step', 'ps 1 (h0:2222) '),
])
def test_a_timeout_names_the_missing_tasks_it_waits_for(is_chief, sync, advance, named):
  dog, clock, _ = watchdog(is_chief=is_chief, sync=sync, absent_tasks=lambda: ABSENT)
  if advance == 'step':
    dog.enter('training')
    advance = TIMEOUTS.step_timeout_secs + 1
  clock.now += advance
  _, reason = dog.check()
  assert 'not answering: ' + named in reason, reason


def test_startup_timeout_names_the_flag_and_what_is_missing():
  dog, clock, _ = watchdog()
  clock.now += 10
  assert dog.check() is None
  clock.now += 0.1
  code, reason = dog.check()
  assert code == EXIT_CLUSTER_FAILURE
  assert '--startup_timeout_secs' in reason and 'the chief (worker 0)' in reason
  chief, clock, _ = watchdog(is_chief=True)
  clock.now += 11
  assert 'a parameter server does not answer' in chief.check()[1]


def test_each_step_rearms_the_step_timeout():
  dog, clock, _ = watchdog()
  dog.enter('training')
  for _ in range(5):
    clock.now += 4
    dog.beat()
    assert dog.check() is None
  clock.now += 5.1
  code, reason = dog.check()
  assert code == EXIT_CLUSTER_FAILURE and '--step_timeout_secs' in reason
  assert 'a worker is missing' in reason


def test_zero_disables_the_timeouts():
  dog, clock, _ = watchdog(LoopTimeouts(startup_timeout_secs=0, step_timeout_secs=0))
  clock.now += 1e6
  assert dog.check() is None
  dog.enter('training')
  clock.now += 1e6
  assert dog.check() is None


def test_stop_before_training_ends_at_once_with_0():
  dog, _, stop = watchdog()
  stop.set()
  assert dog.check() == (0, 'stopped by a signal before training began')


@pytest.mark.parametrize('is_chief, expected', [(False, 0), (True, EXIT_CLUSTER_FAILURE)])
def test_a_stopping_task_stuck_in_a_step_is_unblocked_then_ended(is_chief, expected):
  dog, clock, stop = watchdog(is_chief=is_chief)
  unblocked = []
  dog.enter('training', sess=type('S', (), {'run': lambda self, op: unblocked.append(op)})(),
            unblock_op='add_token')
  stop.set()
  assert dog.check() is None
  clock.now += 2.1
  assert dog.check() is None and unblocked == ['add_token']
  clock.now += 2
  code, _ = dog.check()
  assert code == expected and unblocked == ['add_token']


def test_the_watchdog_thread_calls_exit_with_the_verdict():
  clock, stop = Clock(), threading.Event()
  exited = threading.Event()
  codes = []

  def exit_fn(code):
    codes.append(code)
    exited.set()

  with Watchdog(TIMEOUTS, ClusterRole(is_chief=False), LoopHooks(stop), True, exit_fn=exit_fn,
                clock=clock):
    clock.now += 11
    assert exited.wait(30)
  assert codes == [EXIT_CLUSTER_FAILURE]


def test_a_step_timeout_without_input_says_so_and_arms_outside_a_cluster_too():
  """A trainer reading from a tf.data service (training.train passes DataWorkers.describe)
  says why no step ends when no data worker is left, and with workers that answer still
  names the input, not a parameter server (outside a cluster there is none)."""
  clock, stop = Clock(), threading.Event()
  state = ['; the tf.data service at d:1 has no data worker left']
  dog = Watchdog(TIMEOUTS, ClusterRole(), LoopHooks(stop, input_state=lambda: state[0]), False,
                 exit_fn=None, clock=clock)
  dog.enter('training')
  clock.now += TIMEOUTS.step_timeout_secs + 1
  assert dog.check() == (EXIT_CLUSTER_FAILURE, (
      'no training step finished for 5 s (--step_timeout_secs): no input comes; the '
      'tf.data service at d:1 has no data worker left'))
  state[0] = ''  # Data workers that answer: the step waits for input all the same.
  assert dog.check()[1] == (
      'no training step finished for 5 s (--step_timeout_secs): the step waits for its '
      'input from the tf.data service, whose dispatcher and data workers answer: a '
      'restarted dispatcher not yet rejoined, or data workers too slow for the step '
      '(docs/data_service.md)')


@pytest.mark.parametrize('absent, says', [
    ([], 'every parameter server answers too, unless one hangs'),   # A cluster, all answer.
    (ABSENT, 'a parameter server does not answer; not answering: ps 1 (h0:2222)'),
])
def test_in_a_cluster_with_a_service_a_silent_ps_is_named_else_the_input(absent, says):
  clock, stop = Clock(), threading.Event()
  dog = Watchdog(TIMEOUTS, ClusterRole(absent_tasks=lambda: absent),
                 LoopHooks(stop, input_state=lambda: ''), False, exit_fn=None, clock=clock)
  dog.enter('training')
  clock.now += TIMEOUTS.step_timeout_secs + 1
  assert says in dog.check()[1]


class StateSession:
  """A session whose run returns `state` for the state op (or raises `error`)."""

  def __init__(self, state=None, error=None):
    self.state, self.error, self.options = state, error, None

  def run(self, fetches, options=None):
    self.options = options
    if self.error:
      raise self.error
    return self.state


def test_a_synchronous_timeout_reports_what_the_step_waits_on():
  """The chief's step waits with its own gradient for step 19 sent and worker 1's not:
  the line gives the step, the accumulators' gradients, the tokens and each worker's last
  step sent, read within a time-out of its own."""
  dog, clock, _ = watchdog(is_chief=True, sync=True)
  sess = StateSession({'global_step': 19, 'held': [1, 1, 1], 'tokens': [0, 0],
                       'sent': [19, 12]})
  dog.enter('training', sess, unblock_op=None, state_op='state')
  clock.now += TIMEOUTS.step_timeout_secs + 1
  code, reason = dog.check()
  assert code == EXIT_CLUSTER_FAILURE
  assert reason.endswith(
      '; at the time-out: global step 19, gradients held by the 3 accumulators 1 to 1, '
      'tokens waiting per worker 0,0, step of each worker\'s last gradient 19,12; start the '
      'missing task, it rejoins (docs/cluster.md)'), reason
  assert sess.options.timeout_in_ms == 1000 * Watchdog.STATE_TIMEOUT_SECS


def test_a_state_that_cannot_be_read_leaves_the_line_as_it_was():
  dog, clock, _ = watchdog(is_chief=True, sync=True)
  dog.enter('training', StateSession(error=RuntimeError('deadline exceeded')),
            state_op='state')
  clock.now += TIMEOUTS.step_timeout_secs + 1
  _, reason = dog.check()
  assert reason.endswith('parameter server hangs; start the missing task, it rejoins '
                         '(docs/cluster.md)'), reason


def test_a_chief_rejoining_a_job_already_at_its_last_step_skips_nothing():
  """The rejoin op moves the global step on by one (the step in flight): a chief killed
  after the last update and before its final save would end one past the limit (seen in
  the chaos test: 25 of 24)."""
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=24)
  continued, fresh = (types.SimpleNamespace(continued_from_servers=value)
                      for value in (True, False))
  assert session_loop._rejoins(step_fn, continued, 24) is False
  assert session_loop._rejoins(step_fn, continued, 23) is True
  assert session_loop._rejoins(step_fn, fresh, 23) is False
  unlimited = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=None)
  assert session_loop._rejoins(unlimited, continued, 10 ** 6) is True
  assert session_loop._rejoins(lambda *args: (0.0, True), continued, 24) is True


@pytest.mark.parametrize('is_chief', [True, False])
def test_the_local_init_of_a_resumed_synchronous_job_starts_at_the_restored_step(is_chief):
  """The local init op sets the sync local step to the global step, after the local
  variables' initializer that runs in the same session.run (it once could land after
  it, leaving 0 in about 3 % of runs: on a resume at step 19 a worker's gradient was for
  step 0, dropped as stale, and the job deadlocked; seen in a Slurm scancel-and-resume)."""
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    weight = tf.Variable(1.0, name='weight')
    optimizer = sync_replicas.SyncReplicasOptimizer(
        tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
        total_num_replicas=2, worker_index=0 if is_chief else 1)
    train_op = optimizer.apply_gradients(
        [(tf.constant(2.0), weight)], global_step=global_step)
    ops = session_loop._loop_ops(train_op, global_step, is_chief, optimizer,
                                 distributed=True)
    [local_step] = [v for v in tf.local_variables() if 'sync_rep_local_step' in v.name]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(global_step.assign(19))   # As restored from model.ckpt-19.
      starts = []
      for _ in range(300):
        sess.run(ops.local_init_op)
        starts.append(int(sess.run(local_step)))
  assert starts == [19] * 300
