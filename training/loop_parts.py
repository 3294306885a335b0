"""What `supervised_train` (training.session_loop) takes, one object per concept.

  * `LoopGraph`: what the training graph hands the loop (the train op, the global step,
    the chief's fine-tune init, the synchronous optimizer and the workers' counters).
  * `ClusterRole`: this task's place in the loop: its session target, whether it is the
    chief, whether it owns its copy of the model (workers without ps), and the calls
    that only a cluster makes (the silent tasks, the settings agreement, the stop vote).
  * `Saving`: where and how often the chief saves (in global steps or seconds).
  * `LoopHooks`: what the trainer runs at the loop's edges (a stop request, before the
    first step, after the last) and, with a tf.data service, why no input comes.
The session's ConfigProto and the LoopTimeouts travel beside them.
"""

import dataclasses

from training.cadence import Cadence

__all__ = ['LoopGraph', 'ClusterRole', 'Saving', 'LoopHooks']


@dataclasses.dataclass(frozen=True)
class LoopGraph:
  """The graph's part: `train_op`, `global_step`; `init_fn(sess)`, the chief's restore
  of a fine-tuning checkpoint (or None); `sync_optimizer`, deployment.sync_replicas'
  optimizer when synchronous; `worker_stats`, deployment.worker_stats.WorkerStats."""
  train_op: object
  global_step: object
  init_fn: object = None
  sync_optimizer: object = None
  worker_stats: object = None


@dataclasses.dataclass(frozen=True)
class ClusterRole:
  """This task in the loop. `master`: the session target ('' for one process; set, the
  watchdog is armed). `owns_model`: workers without ps each initialize their own model
  (module doc of training.session_loop). `absent_tasks()`: the tasks that do not answer,
  named by a time-out (ps_cluster.absent_tasks). `before_session()`: workers without
  ps, their settings agreement before any collective (start-up timeout). `stop_vote`:
  their vote on the step to stop after (deployment.replicated.StopVote)."""
  master: str = ''
  is_chief: bool = True
  owns_model: bool = False
  absent_tasks: object = None
  before_session: object = None
  stop_vote: object = None


@dataclasses.dataclass(frozen=True)
class Saving:
  """The chief saves to `logdir` (None: nowhere) between steps, every `interval_steps`
  global steps or `interval_secs` seconds (0 = off; training.cadence), and at the end."""
  logdir: object = None
  interval_steps: int = 0
  interval_secs: float = 0.0

  def cadence(self):
    """A fresh Cadence of these intervals, for one run's saves."""
    return Cadence(self.interval_steps, self.interval_secs)


@dataclasses.dataclass(frozen=True)
class LoopHooks:
  """The trainer's calls at the loop's edges. `stop_event`: a threading.Event, set to
  stop after the current step. `before_steps(sess)`: once the session is ready, before
  the first step, under the start-up timeout (training.cluster_agreement's check of the
  chief's settings). `finish_fn(sess, beat)`: on the chief after the last step when
  training finished (not stopped) and the global step moved, before the final save
  (precise batch norm); `beat()` re-arms the watchdog. `input_state()`: with a tf.data
  service, '' or '; why no input comes' (it arms the watchdog too)."""
  stop_event: object = None
  before_steps: object = None
  finish_fn: object = None
  input_state: object = None
