"""benchmarks.chaos in its reduced form: a real synchronous cluster (1 ps, 3 workers, one
of them a backup) on 127.0.0.1 whose chief and one other worker are killed (SIGKILL)
and restarted during the run. The full form (2 ps, 10 workers, 2 backups, 8 kills) is
`make chaos` (and the start of `make stress`). The checks are the driver's own (the job's files: end marker, checkpoints,
the chief's record of updates, each task's log and exit status), and the test also reads
those files itself for what it asserts by name."""

import os
import random

import pytest

from benchmarks import chaos
from core.errors import ConfigError
from deployment import sync_replicas

# Each step of this cluster costs about 0.15 CPU-s (4 tasks), so the job is short: 50 steps.
# The kills come by the clock (seeded waits of 0.5x to 1.5x kill_every_secs), the steps as
# fast as the machine runs them, and the driver kills only below step 40 (90 % of the run
# less a progress line). Seed 3 kills the chief first, 0.44 s after the line of step 10
# (at step 15 in a loaded run), then worker 1 0.55 s after the chief's restart began, while
# the job still waits for the chief (a start takes seconds), so the second kill comes at
# the step of the first. With kill_every_secs=2.0 the first wait alone let a quiet machine
# reach step 50, and the run needed 150 steps.
REDUCED = chaos.ChaosSettings(num_ps=1, num_workers=3, backup_workers=1, kills=2,
                              chief_kills=1, first_kill_step=6, kill_every_secs=0.5,
                              down_secs=1.0, max_number_of_steps=50, seed=3,
                              time_limit_secs=300.0)
AGGREGATE = REDUCED.num_workers - REDUCED.backup_workers


@pytest.mark.slow
@pytest.mark.cluster
def test_killing_and_restarting_workers_and_the_chief_keeps_every_promise(digits_dir,
                                                                         tmp_path):
  lines = []
  report = chaos.run_chaos(REDUCED, digits_dir, str(tmp_path),
                           say=lambda *args, **kwargs: lines.append(args[0]))
  assert report.ok, (report, lines)
  killed = [name for _, name, _ in report.kills]
  assert len(killed) == 2 and 'worker-0' in killed, report.kills
  assert set(report.statuses.values()) == {0}
  assert len(report.statuses) == REDUCED.num_ps + REDUCED.num_workers
  assert report.final_step == REDUCED.max_number_of_steps
  # The record: strictly increasing steps, one gradient per worker at most, all current.
  trace = sync_replicas.read_trace(os.path.join(str(tmp_path), 'train', chaos.TRACE_FILE))
  assert [l.step for l in trace] == sorted({l.step for l in trace})
  assert trace[-1].step == REDUCED.max_number_of_steps - 1
  for line in trace:
    assert max(line.counts) == 1 and sum(line.counts) >= AGGREGATE, line
  # The restarted chief continued from the parameter servers (skipping the step in flight).
  with open(os.path.join(str(tmp_path), 'logs', 'worker-0.log')) as log:
    chief = log.read()
  assert chief.count('=== worker-0 start') == 2
  assert 'Rejoining a synchronous job in progress' in chief.rsplit('=== ', 1)[1]


def test_the_kill_plan_hits_the_chief_as_asked_and_never_one_task_twice_in_a_row():
  settings = chaos.ChaosSettings(num_workers=10, kills=8, chief_kills=2)
  for seed in range(20):
    plan = chaos.kill_plan(settings, random.Random(seed))
    assert len(plan) == 8 and plan.count(0) == 2 and all(0 <= i < 10 for i in plan)
    assert all(a != b for a, b in zip(plan, plan[1:])), plan


@pytest.mark.parametrize('changes, flag', [
    (dict(backup_workers=10), '--backup_workers=10'),
    (dict(chief_kills=9), '--chief_kills=9'),
    (dict(first_kill_step=290), '--first_kill_step=290'),
    (dict(num_workers=1), '--num_workers=1'),
    (dict(isolation='open'), '--isolation=open'),
])
def test_settings_no_run_can_keep_are_refused_in_one_line(changes, flag):
  with pytest.raises(ConfigError, match=flag):
    chaos.check_settings(chaos.ChaosSettings(**changes))
