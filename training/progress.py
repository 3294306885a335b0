"""The training step handed to `supervised_train` (training.session_loop), with honest
progress lines.

slim's own step runs three session calls per step (train, should_log, should_stop); this
one runs one and decides the rest in Python. When the summary cadence is due (the chief:
--save_summaries_steps, --save_summaries_secs) that one run also fetches the graph's
summaries, so they show the batch the step trains on. Each time the global step crosses
a multiple of `log_every_n_steps` it logs

    step 120 of 1000: loss = 0.3124 (2451.3 examples/sec; 0.026 sec/step; lr 0.01;
        input wait 3%; ETA 23s)

(" of N" and the ETA with a step limit; lr and input wait when the graph gives them; with
float16 the loss scale and the steps skipped for overflow, `scalars`), and
the chief writes examples_per_sec, sec_per_step, global_step/sec, input/wait_share and,
for video clips,
input/skipped_clips and input/damaged_videos (clips skipped because a frame does not
decode, and the distinct videos they came from) to TensorBoard at the same moment with
the same values (`training.summaries.write_scalars`). examples/sec counts this worker's
examples (per-clone batch x clones) over this worker's steps since the previous line, so
multi-clone runs are compared in examples, not in steps, and asynchronous workers (whose
global step also moves for others) count only their own work.

With a tf.data service, a line follows when a data worker left or joined or the
dispatcher stopped answering (service_client.DataWorkers). In a cluster the chief
follows each line with one about its workers, read from the
parameter servers' counters (deployment.worker_stats), and writes the same figures as
cluster/worker_<i>/steps_per_sec (with the counts, cluster/worker_<i>/steps) and,
synchronous, cluster/stale_gradients, at the global step read with the counters:

    cluster: steps/sec by worker 0: 4.10, 1: 4.05, 2: 2.21; stale gradients dropped: 3
        (worker 2: 3)
"""

import dataclasses
import time

from absl import logging

from core.durations import duration
from tf_compat import tf
from training import divergence, summaries

__all__ = ['ProgressStep', 'ProgressLines', 'InputWatch', 'ClusterReading', 'SummaryWriting']


@dataclasses.dataclass(frozen=True)
class ProgressLines:
  """The progress line. `examples_per_step`: examples this worker processes per step
  (batch x clones). `every_n_steps`: its period in global steps (0: no lines).
  `learning_rate`: optional tensor, shown. `input_wait`: optional tensor, the seconds
  this worker's steps waited for input so far (training.summaries.InputWait.total); its
  growth over the time spent in the steps' session calls is the share (a save or
  summary between steps is no step). `scalars`: (tag, label, tensor) triples fetched
  with every step, shown as 'label value' and written to TensorBoard under tag (the loss
  scale)."""
  examples_per_step: int
  every_n_steps: int = 10
  learning_rate: object = None
  input_wait: object = None
  scalars: tuple = ()


@dataclasses.dataclass(frozen=True)
class InputWatch:
  """This worker's input beside its steps. `skips`: optional damaged_frames.SkipCounter:
  its counts go in the lines and (the chief's) TensorBoard, and training stops once it
  is `exceeded`. `data_workers`: optional service_client.DataWorkers: a line when one
  left or joined."""
  skips: object = None
  data_workers: object = None


@dataclasses.dataclass(frozen=True)
class ClusterReading:
  """The cluster's counters (deployment.worker_stats). `worker_stats`: WorkerStats: each
  step also fetches this worker's row (`worker_steps`, `stale_gradients`). `progress`:
  the chief's ClusterProgress: the whole table is read at the start and at each progress
  line, which is followed by a line of every worker's steps/sec (and the stale gradients
  dropped), also written to TensorBoard."""
  worker_stats: object = None
  progress: object = None


@dataclasses.dataclass(frozen=True)
class SummaryWriting:
  """`gate`: a training.summary_gate gate, fetched with train_op (the step's own batch),
  written with the chief's writer when `cadence` (a training.cadence.Cadence) is due."""
  gate: object = None
  cadence: object = None


class ProgressStep:
  """A `train_step_fn` in slim.learning.train's protocol, which `supervised_train` keeps:
  (sess, train_op, global_step, kwargs)."""

  def __init__(self, lines, number_of_steps=None, stop_event=None, *, inputs=InputWatch(),
               cluster=ClusterReading(), summaries=SummaryWriting(), on_first_step=None):
    """
    Args:
      lines: ProgressLines.
      number_of_steps: stop once the global step reaches this (None: never).
      stop_event: optional threading.Event; when set, training stops before the next step.
      inputs: InputWatch (`stopped_for_damage` is True once its skips are exceeded).
      cluster: ClusterReading.
      summaries: SummaryWriting.
      on_first_step: optional fn(tf.RunMetadata, summary writer or None): the first step
        is traced (FULL_TRACE) and its metadata handed over, e.g. to log where the clones
        really ran, with the chief's summary writer.
    """
    self._examples_per_step, self._log_every = lines.examples_per_step, lines.every_n_steps
    self._skips, self._data_workers = inputs.skips, inputs.data_workers
    self._summaries, self._summary_cadence = summaries.gate, summaries.cadence
    self.stopped_for_damage = False
    self._on_first_step = on_first_step
    worker_stats = cluster.worker_stats
    self._extras = {name: tensor for name, tensor in
                    (('learning_rate', lines.learning_rate), ('input_wait', lines.input_wait),
                     ('worker_row', worker_stats and worker_stats.own_row))
                    if tensor is not None}
    self._cluster = cluster.progress
    self._table = worker_stats.value if cluster.progress is not None else None
    self.worker_steps = self.stale_gradients = None
    self._scalars = tuple((tag, label) for tag, label, _ in lines.scalars)
    self._extras.update((tag, tensor) for tag, _, tensor in lines.scalars)
    self._last_extras = {}
    self._last_wait, self._step_seconds, self.input_wait_share = None, 0.0, None
    self._number_of_steps = number_of_steps
    self._stop_event = stop_event
    self._start_time = None
    self._last_time = None
    self._last_logged_step = None
    self._steps_since_log = 0
    self.local_steps = 0
    self.last_loss = None
    self.last_global_step = None
    self.examples_per_sec = None

  def is_final(self, step):
    """Whether global step `step` is the run's last (--max_number_of_steps reached)."""
    return bool(self._number_of_steps and step >= self._number_of_steps)

  def _done(self, step):
    if self._stop_event is not None and self._stop_event.is_set():
      return True
    return self.is_final(step)

  def __call__(self, sess, train_op, global_step, train_step_kwargs):
    # The loop may pass the global step read after train_op: a synchronous worker then
    # sees the update its step waited for and does not start a step past the last.
    step_after_train = train_step_kwargs.get('step_after_train', global_step)
    if self._start_time is None:
      # slim calls the step before asking whether to stop: a run resumed at its last
      # step (or stopped before it began) must not train one step more.
      self.last_global_step = int(sess.run(global_step))
      self._last_logged_step = self.last_global_step
      self._start_time = self._last_time = time.time()
      if self._cluster is not None:
        self._cluster.report(sess.run(self._table), self._start_time)
      if self._summary_cadence is not None:
        self._summary_cadence.start(self.last_global_step)
      if self._done(self.last_global_step):
        return self.last_loss, True
    loss, step = self._run(sess, [train_op, step_after_train],
                           train_step_kwargs.get('summary_writer'))
    self.local_steps += 1
    self._steps_since_log += 1
    self.last_loss, self.last_global_step = float(loss), int(step)
    divergence.check_loss(self.last_global_step, self.last_loss,
                          any(tag == 'loss_scale' for tag, _ in self._scalars))
    if self._log_every and step // self._log_every > self._last_logged_step // self._log_every:
      self._log(step, loss, train_step_kwargs.get('summary_writer'),
                None if self._cluster is None else sess.run([self._table, global_step]))
    if self._skips is not None and self._skips.exceeded:
      self.stopped_for_damage = True
      return loss, True
    return loss, self._done(step)

  def _summary_due(self, summary_writer):
    return (summary_writer is not None and self._summaries is not None
            and self._summary_cadence is not None
            and self._summary_cadence.due(self.last_global_step + 1))

  def _run(self, sess, fetches, summary_writer=None):
    """-> (loss, step), fetching the extras too, and the summaries of this very step
    when due (no batch of their own); the first step traced if asked."""
    summarize = self._summary_due(summary_writer)
    fetches = list(fetches) + ([self._extras] if self._extras else [])
    feed = {}
    if self._summaries is not None:
      fetches += self._summaries.fetches(summarize)
      feed = self._summaries.feed(summarize)
    started = time.time()
    if self._on_first_step is None:
      values = sess.run(fetches, feed_dict=feed)
      self._step_seconds += time.time() - started
    else:  # The traced step comes before the first line, whose share is not shown.
      metadata = tf.RunMetadata()
      values = sess.run(fetches, feed_dict=feed, options=tf.RunOptions(
          trace_level=tf.RunOptions.FULL_TRACE), run_metadata=metadata)
      callback, self._on_first_step = self._on_first_step, None
      callback(metadata, summary_writer)
    if summarize:  # (a gate's value is b'' on the steps that do not write)
      summary_writer.add_summary(values[-1], values[1])
      self._summary_cadence.done(values[1])
    if self._extras:
      self._last_extras = values[2]
      if 'worker_row' in self._last_extras:
        self.worker_steps, self.stale_gradients = (
            int(v) for v in self._last_extras['worker_row'])
    return values[0], values[1]

  def _log(self, step, loss, summary_writer=None, reading=None):
    """The progress line and its scalars; with `reading` (the chief's reading of the
    cluster's WorkerStats and of the global step, in one run) the cluster's line and
    scalars too, written at the global step read with the counters: other workers step
    between the chief's train step and that reading, so the counters belong to it."""
    now = time.time()
    steps = self._steps_since_log
    elapsed = max(1e-9, now - self._last_time)
    self.examples_per_sec = steps * self._examples_per_step / elapsed
    scalars = {'examples_per_sec': self.examples_per_sec, 'sec_per_step': elapsed / steps,
               'global_step/sec': (step - self._last_logged_step) / elapsed}
    self._update_input_wait()
    if self.input_wait_share is not None:
      scalars['input/wait_share'] = self.input_wait_share
    scalars.update((tag, self._last_extras[tag]) for tag, _ in self._scalars)
    if self._skips is not None:
      scalars['input/skipped_clips'] = self._skips.skipped_clips
      scalars['input/damaged_videos'] = self._skips.damaged_videos
    logging.info('step %d%s: loss = %.4f (%s)', step,
                 ' of %d' % self._number_of_steps if self._number_of_steps else '', loss,
                 '; '.join(self._details(step, elapsed / steps)))
    summaries.write_scalars(summary_writer, step, scalars)
    if reading is not None:
      table, read_step = reading
      cluster_scalars, line = self._cluster.report(table, now)
      summaries.write_scalars(summary_writer, int(read_step), cluster_scalars)
      if line:
        logging.info('%s', line)
    for line in self._data_workers.changes() if self._data_workers else ():
      logging.warning('%s', line)
    self._last_time, self._steps_since_log, self._last_logged_step = now, 0, step

  def _update_input_wait(self):
    wait = self._last_extras.get('input_wait')
    if wait is not None and self._last_wait is not None:
      self.input_wait_share = min(1.0, max(0.0, (wait - self._last_wait)
                                           / max(1e-9, self._step_seconds)))
    self._last_wait, self._step_seconds = wait, 0.0

  def _details(self, step, sec_per_step):
    details = ['%.1f examples/sec' % self.examples_per_sec, '%.3f sec/step' % sec_per_step]
    if 'learning_rate' in self._last_extras:
      details.append('lr %.3g' % self._last_extras['learning_rate'])
    if self.input_wait_share is not None:
      details.append('input wait %.0f%%' % (100 * self.input_wait_share))
    details.extend('%s %g' % (label, self._last_extras[tag]) for tag, label in self._scalars)
    if self._skips is not None and self._skips.skipped_clips:
      videos = self._skips.damaged_videos
      details.append('skipped %d clips of %d damaged video%s' % (
          self._skips.skipped_clips, videos, '' if videos == 1 else 's'))
    if self._number_of_steps:
      remaining = max(0, self._number_of_steps - step) * sec_per_step
      details.append('ETA %s' % duration(remaining))
    return details

  def last_value(self, tag):
    """The last fetched value of an extra tensor ('learning_rate', a scalars tag), or
    None before any step."""
    return self._last_extras.get(tag)

  def overall_examples_per_sec(self):
    """This worker's examples/sec over the whole run (None before any step)."""
    if not self.local_steps:
      return None
    elapsed = max(1e-9, time.time() - self._start_time)
    return self.local_steps * self._examples_per_step / elapsed
