"""ProgressStep with a fake session and a fake clock: lines, rates and stopping."""

import logging
import re
import threading
import types

import pytest

from training import progress
from deployment.worker_stats import ClusterProgress
from tf_compat import tf
from training.cadence import Cadence
from training.progress import ClusterReading, ProgressLines, ProgressStep, SummaryWriting
from training.summary_gate import SummaryGate, Ungated

LINE = re.compile(r'^step (\d+)(?: of \d+)?: loss = (\d+\.\d{4}) \((\d+\.\d) examples/sec; '
                  r'(\d+\.\d{3}) sec/step(?:; [^;]+)*\)$')


class FakeClock:
  """Stands for the time module in training.progress; only moves when told to."""

  def __init__(self, start=1000.0):
    self.now = start

  def time(self):
    return self.now


class FakeSession:
  """`run([train_op, global_step])` -> (loss, step).

  Each call takes `seconds` on `clock` and moves the global step by `jump` (more than 1
  when other asynchronous workers also step). The loss of call i is 1/i by default.
  """

  def __init__(self, clock=None, seconds=0.1, jump=1, start=0, losses=None):
    self.clock = clock
    self.seconds = seconds
    self.step = start
    self.jump = jump
    self.calls = 0
    self.fetches = []
    self._losses = losses

  def run(self, fetches, feed_dict=None):
    if not isinstance(fetches, (list, tuple)):
      return self.step  # Reading the global step alone: no training step, no time.
    self.fetches.append(fetches)
    if self.clock is not None:
      self.clock.now += self.seconds
    self.calls += 1
    self.step += self.jump
    loss = self._losses[self.calls - 1] if self._losses else 1.0 / self.calls
    return loss, self.step


@pytest.fixture
def clock(monkeypatch):
  fake = FakeClock()
  monkeypatch.setattr(progress, 'time', types.SimpleNamespace(time=fake.time))
  return fake


@pytest.fixture
def lines(caplog):
  caplog.set_level(logging.INFO, logger='absl')

  def get():
    found = []
    for record in caplog.records:
      match = LINE.match(record.getMessage())
      if match:
        found.append((int(match.group(1)), float(match.group(2)), float(match.group(3)),
                      float(match.group(4))))
    return found
  return get


def _run(step_fn, sess, max_calls=1000):
  """Calls step_fn as slim.learning.train does until it asks to stop; returns the calls."""
  for call in range(1, max_calls + 1):
    _, should_stop = step_fn(sess, 'train_op', 'global_step', {})
    if should_stop:
      return call
  return None


def test_logs_every_n_steps_with_rates(clock, lines):
  sess = FakeSession(clock, seconds=0.5)
  step_fn = ProgressStep(ProgressLines(64, every_n_steps=4), number_of_steps=12)
  calls = _run(step_fn, sess)
  assert calls == 12
  # Lines at steps 4, 8, 12: 4 steps of 64 examples in 4 x 0.5 s each time.
  got = lines()
  assert [line[0] for line in got] == [4, 8, 12]
  for step, loss, rate, sec_per_step in got:
    assert loss == pytest.approx(1.0 / step, abs=5e-5)
    assert rate == pytest.approx(4 * 64 / 2.0)
    assert sec_per_step == pytest.approx(0.5)
  assert step_fn.examples_per_sec == pytest.approx(128.0)
  assert step_fn.last_global_step == 12
  assert step_fn.last_loss == pytest.approx(1.0 / 12)
  # One session call per step, fetching [train_op, global_step].
  assert sess.calls == 12
  assert sess.fetches[0] == ['train_op', 'global_step']


def test_first_interval_counts_from_the_first_step(clock, lines):
  """The first line covers the first steps only, not the time before training."""
  step_fn = ProgressStep(ProgressLines(10, every_n_steps=2), number_of_steps=2)
  clock.now += 1000.0  # start-up (session creation, restore) after the step fn exists
  _run(step_fn, FakeSession(clock, seconds=0.25))
  (step, _, rate, sec_per_step), = lines()
  assert step == 2
  assert sec_per_step == pytest.approx(0.25)
  assert rate == pytest.approx(2 * 10 / 0.5)


def test_no_lines_when_log_every_is_zero(clock, lines):
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=5)
  assert _run(step_fn, FakeSession(clock)) == 5
  assert lines() == []
  assert step_fn.last_global_step == 5


def test_stops_at_number_of_steps_counting_the_global_step(clock):
  # Resuming at global step 7 with number_of_steps=10: three more steps.
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=10)
  assert _run(step_fn, FakeSession(clock, start=7)) == 3
  assert step_fn.last_global_step == 10


def test_never_stops_without_number_of_steps(clock):
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=None)
  assert _run(step_fn, FakeSession(clock), max_calls=50) is None


def test_stops_when_the_event_is_set(clock):
  event = threading.Event()
  sess = FakeSession(clock)
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=None,
                         stop_event=event)
  for _ in range(3):
    _, should_stop = step_fn(sess, 'train_op', 'global_step', {})
    assert not should_stop
  event.set()
  loss, should_stop = step_fn(sess, 'train_op', 'global_step', {})
  assert should_stop
  assert loss == pytest.approx(1.0 / 4)
  assert sess.calls == 4


def test_returns_the_loss_of_the_step(clock):
  sess = FakeSession(clock, losses=[2.5, 1.25])
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=2)
  assert step_fn(sess, 'train_op', 'global_step', {}) == (2.5, False)
  assert step_fn(sess, 'train_op', 'global_step', {}) == (1.25, True)
  assert step_fn.last_loss == 1.25


def test_asynchronous_global_step_counts_local_steps(clock, lines):
  """Other workers move the global step too: 3 per call here. Rates count this worker.

  A line comes each time the global step crosses a multiple of 5 (at 6, 12, 15, 21, 27,
  30), after 1 or 2 calls of this worker; either way one batch of 32 per 0.2 s.
  """
  sess = FakeSession(clock, seconds=0.2, jump=3)
  step_fn = ProgressStep(ProgressLines(32, every_n_steps=5), number_of_steps=30)
  assert _run(step_fn, sess) == 10
  got = lines()
  assert [line[0] for line in got] == [6, 12, 15, 21, 27, 30]
  for _, _, rate, sec_per_step in got:
    assert rate == pytest.approx(32 / 0.2)  # not 3 global steps x 32 per call
    assert sec_per_step == pytest.approx(0.2)  # per local step, not per global step


def test_asynchronous_global_step_every_call_on_a_multiple(clock, lines):
  sess = FakeSession(clock, seconds=0.5, jump=3)
  step_fn = ProgressStep(ProgressLines(32, every_n_steps=3), number_of_steps=9)
  assert _run(step_fn, sess) == 3
  got = lines()
  assert [line[0] for line in got] == [3, 6, 9]
  for _, _, rate, sec_per_step in got:
    assert rate == pytest.approx(32 / 0.5)
    assert sec_per_step == pytest.approx(0.5)


def test_asynchronous_global_step_that_skips_the_multiples_still_logs(clock, lines):
  """Two asynchronous workers in lock step: this one sees global steps 1, 3, 5, ...

  The docstring promises a line every log_every_n_steps global steps; a worker whose
  global step never lands on a multiple of it must still report (here: none of
  1, 3, ..., 39 is a multiple of 4).
  """
  sess = FakeSession(clock, seconds=0.1, jump=2, start=-1)
  step_fn = ProgressStep(ProgressLines(32, every_n_steps=4), number_of_steps=39)
  assert _run(step_fn, sess) == 20
  assert len(lines()) >= 5
  assert step_fn.examples_per_sec == pytest.approx(32 / 0.1)


class ExtrasSession(FakeSession):
  """Also answers the extras dict: a learning rate and a wait that grows `wait` per call."""

  def __init__(self, clock, seconds, wait):
    super().__init__(clock, seconds=seconds)
    self.wait = wait

  def run(self, fetches, feed_dict=None):
    if not isinstance(fetches, list) or len(fetches) == 2:
      return super().run(fetches)
    loss, step = super().run(fetches[:2])
    return loss, step, {'learning_rate': 0.01, 'input_wait': self.calls * self.wait}


class Writer:
  def __init__(self):
    self.summaries = []

  def add_summary(self, summary, step):
    self.summaries.append((step, {v.tag: v.simple_value for v in summary.value}))


def test_lines_show_the_step_limit_rate_eta_and_input_wait_as_tensorboard_gets_them(
    clock, caplog):
  caplog.set_level(logging.INFO, logger='absl')
  sess = ExtrasSession(clock, seconds=0.5, wait=0.125)
  writer = Writer()
  step_fn = ProgressStep(ProgressLines(64, every_n_steps=4, learning_rate='lr',
                                       input_wait='wait'), number_of_steps=12)
  for _ in range(12):
    step_fn(sess, 'train_op', 'global_step', {'summary_writer': writer})
  messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith('step ')]
  assert messages[1] == ('step 8 of 12: loss = 0.1250 (128.0 examples/sec; 0.500 sec/step; '
                         'lr 0.01; input wait 25%; ETA 2.0s)')
  assert 'input wait' not in messages[0]  # the first line has no earlier wait to compare
  assert [step for step, _ in writer.summaries] == [4, 8, 12]
  step, values = writer.summaries[1]
  assert values == pytest.approx({'examples_per_sec': 128.0, 'sec_per_step': 0.5,
                                  'global_step/sec': 2.0, 'input/wait_share': 0.25})


def test_the_input_wait_share_is_of_the_steps_time_not_of_what_ran_between_them(clock,
                                                                                 lines):
  """A save between steps (0.5 s here) is no step: it neither waits for input nor
  dilutes the steps' share, while sec/step counts it."""
  sess = ExtrasSession(clock, seconds=0.5, wait=0.125)
  step_fn = ProgressStep(ProgressLines(64, every_n_steps=4, learning_rate='lr',
                                       input_wait='wait'), number_of_steps=8)
  for _ in range(8):
    step_fn(sess, 'train_op', 'global_step', {})
    clock.now += 0.5
  assert lines()[-1][3] == pytest.approx(1.0)
  assert step_fn.input_wait_share == pytest.approx(0.25)


class ClusterSession(FakeSession):
  """A chief's session: each train call also moves every worker's counters (the table of
  deployment.worker_stats: worker 1 steps twice per call, one of them stale)."""

  def __init__(self, clock, seconds):
    super().__init__(clock, seconds=seconds)
    self.table = [[0, 0], [0, 0]]

  def run(self, fetches, feed_dict=None):
    if fetches == 'table':
      return [list(row) for row in self.table]
    if fetches == ['table', 'global_step']:  # The chief's reading, with the global step.
      return [list(row) for row in self.table], self.step + 2  # Others stepped meanwhile.
    if not isinstance(fetches, list) or len(fetches) == 2:
      return super().run(fetches)
    loss, step = super().run(fetches[:2])
    self.table[0][0] += 1
    self.table[1] = [self.table[1][0] + 2, self.table[1][1] + 1]
    return loss, step, {'worker_row': self.table[0]}


def test_the_chief_shows_each_workers_rate_and_the_stale_count(clock, caplog):
  caplog.set_level(logging.INFO, logger='absl')
  sess, writer = ClusterSession(clock, seconds=0.25), Writer()
  stats = types.SimpleNamespace(own_row='row', value='table')
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=4), number_of_steps=8,
                         cluster=ClusterReading(stats, ClusterProgress(2, sync=True)))
  for _ in range(8):
    step_fn(sess, 'train_op', 'global_step', {'summary_writer': writer})
  cluster_lines = [r.getMessage() for r in caplog.records
                   if r.getMessage().startswith('cluster:')]
  # 4 calls of 0.25 s between lines: worker 0 4 steps/s, worker 1 8 (half of them stale).
  assert cluster_lines == [
      'cluster: steps/sec by worker 0: 4.00, 1: 8.00; stale gradients dropped: 4 '
      '(worker 1: 4)',
      'cluster: steps/sec by worker 0: 4.00, 1: 8.00; stale gradients dropped: 8 '
      '(worker 1: 8)']
  # The cluster's scalars at the global step read with the counters, after the line's.
  assert [step for step, _ in writer.summaries] == [4, 6, 8, 10]
  assert writer.summaries[2][1] == pytest.approx({
      'examples_per_sec': 32.0, 'sec_per_step': 0.25, 'global_step/sec': 4.0})
  assert writer.summaries[3][1] == pytest.approx({
      'cluster/worker_0/steps_per_sec': 4.0, 'cluster/worker_1/steps_per_sec': 8.0,
      'cluster/worker_0/steps': 8, 'cluster/worker_1/steps': 16,
      'cluster/worker_0/stale_gradients': 0, 'cluster/worker_1/stale_gradients': 8,
      'cluster/stale_gradients': 8})
  assert (step_fn.worker_steps, step_fn.stale_gradients) == (8, 0)


class SummarySession(FakeSession):
  """Answers [train_op, step, 'summary_op'] with a Summary of the call's loss."""

  def run(self, fetches, feed_dict=None):
    if not isinstance(fetches, list) or len(fetches) == 2:
      return super().run(fetches)
    loss, step = super().run(fetches[:2])
    assert fetches[2:] == ['summary_op'], fetches
    return loss, step, tf.Summary(value=[tf.Summary.Value(tag='loss', simple_value=loss)])


@pytest.mark.parametrize('steps, secs, expected', [
    (4, 0, [4, 8, 12]),
    # 0.5 s per step; a step is due once the time has passed when it starts.
    (0, 1.0, [3, 6, 9, 12]),
    (5, 1.2, [4, 5, 9, 10, 14, 15]),     # whichever comes first; the multiples stay
    (0, 0, []),
])
def test_summaries_are_fetched_with_the_step_when_due(clock, steps, secs, expected):
  """The summary op runs in the training step's own run (no run of its own), on the
  cadence of steps or seconds, and is written at the step read after the update."""
  sess, writer = SummarySession(clock, seconds=0.5), Writer()
  fake_monotonic = lambda: clock.now
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0),
                         number_of_steps=15 if secs == 1.2 else 12,
                         summaries=SummaryWriting(Ungated('summary_op'),
                                                  Cadence(steps, secs, clock=fake_monotonic)))
  _run_with(step_fn, sess, {'summary_writer': writer})
  assert [step for step, _ in writer.summaries] == expected
  # Each summary is of the step it is stamped with: the loss of call i is 1/i.
  for step, values in writer.summaries:
    assert values['loss'] == pytest.approx(1.0 / step)
  assert sess.calls == (15 if secs == 1.2 else 12)


def test_no_summary_is_fetched_without_a_writer(clock):
  """A non-chief worker (no writer) never runs the summary op."""
  sess = SummarySession(clock, seconds=0.5)
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=6,
                         summaries=SummaryWriting(Ungated('summary_op'), Cadence(1, 0)))
  _run_with(step_fn, sess, {})
  assert all(len(fetches) == 2 for fetches in sess.fetches)


class GatedSummarySession(FakeSession):
  """Answers [train_op, step, 'gated'] fed {'write': bool}: the loss's Summary or b''."""

  def __init__(self, clock, seconds):
    super().__init__(clock, seconds=seconds)
    self.feeds, self.names = [], []

  def run(self, fetches, feed_dict=None):
    if not isinstance(fetches, list):
      return super().run(fetches)
    loss, step = super().run(fetches[:2])
    assert fetches[2:] == ['gated'], fetches
    self.feeds.append(feed_dict)
    self.names.append(list(fetches) + sorted(feed_dict))
    if not feed_dict['write']:
      return loss, step, b''
    return loss, step, tf.Summary(value=[tf.Summary.Value(tag='loss', simple_value=loss)])


def test_a_gate_is_fetched_at_every_step_and_fed_whether_to_write(clock):
  """Steps that write and steps that do not fetch and feed the same names (one executor:
  training/summary_gate.py); only the due ones are fed True and written."""
  sess, writer = GatedSummarySession(clock, seconds=0.5), Writer()
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=12,
                         summaries=SummaryWriting(SummaryGate('gated', 'write'), Cadence(4, 0)))
  _run_with(step_fn, sess, {'summary_writer': writer})
  assert sess.names == [['train_op', 'global_step', 'gated', 'write']] * 12
  assert [feed['write'] for feed in sess.feeds] == [step % 4 == 0 for step in range(1, 13)]
  assert [step for step, _ in writer.summaries] == [4, 8, 12]
  for step, values in writer.summaries:
    assert values['loss'] == pytest.approx(1.0 / step)


def test_a_gate_without_a_writer_is_fed_false(clock):
  sess = GatedSummarySession(clock, seconds=0.5)
  step_fn = ProgressStep(ProgressLines(8, every_n_steps=0), number_of_steps=6,
                         summaries=SummaryWriting(SummaryGate('gated', 'write'), Cadence(1, 0)))
  _run_with(step_fn, sess, {})
  assert sess.feeds == [{'write': False}] * 6


def _run_with(step_fn, sess, kwargs):
  while not step_fn(sess, 'train_op', 'global_step', kwargs)[1]:
    pass
