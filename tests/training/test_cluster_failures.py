"""The failure matrix of docs/cluster.md, each row with real processes on 127.0.0.1.

Every test starts its tasks with deployment.cluster.launch_local.LocalCluster (one log per task)
and kills them all on the way out. A kill is SIGKILL: the task gets no chance to clean up.

Each task is a fresh interpreter importing TensorFlow (seconds of CPU), and each step of a
cluster costs about a tenth of a CPU-second, so rows that one job can meet in turn share its
run, and jobs end soon after their last check: a synchronous job sees its worker preempted,
restarted with other flags and rejoining, then its chief lost inside an update; another
first has its chief never arrive, then a worker never arrive and one lost for good; the
relaunch after a parameter server's loss meets a damaged shard; a job without ps is
killed, frozen and stopped, relaunched after each. A task that never arrives is never
started (its port refuses connections, as a killed one's does), or has ended before the
task waiting for it started.
"""

import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from core.params import config_from_argv
from deployment.cluster.launch_local import LocalCluster
from deployment.cluster.process_guards import die_with_parent
from tf_compat import tf
from tests.cluster_tasks import (ROOT, TRAIN_SCRIPT, assert_clean_log, checkpoint_steps,
                                 error_lines, last_start, log_text, ready_steps, steps,
                                 train_flags, trainer, wait_for, wait_for_step, WAIT_SECS)
from training import lifecycle
from training.config import TrainConfig

pytestmark = pytest.mark.cluster


def _assert_all_exit_0(cluster):
  for task in cluster.tasks:
    status = cluster.wait(task.name, WAIT_SECS)
    text = log_text(task)
    assert status == 0, '%s exited %s\n%s' % (task.name, status, text[-4000:])
    assert_clean_log(last_start(text), task.name)


# The chief lost inside a synchronous update, made on purpose from this test's process
# (which reaches the parameter server only when the cluster has no private network
# namespace: isolation='none'; a helper interpreter would cost a TensorFlow import, and
# worker 1's step timeout ran out during one on a loaded machine): once the chief is
# frozen, waits until worker 1 has sent its gradient for the current step
# (deployment.sync_replicas records the last step each worker sent one for: from then on it
# can only wait for a token), calls `kill_chief`, then empties every gradient accumulator
# (shared_name '<variable>:0/grad_accum') as a chief's update does before it applies them
# (an empty one has nothing to give: its take times out), and applies nothing: the update a
# chief lost half-way. Returns (accumulators, gradients taken).
def _take_the_gradients_of_a_lost_update(ps_target, checkpoint, kill_chief):
  reader = tf.train.load_checkpoint(checkpoint)
  dtypes = reader.get_variable_to_dtype_map()
  timeout = tf.RunOptions(timeout_in_ms=10000)
  with tf.Graph().as_default():
    takes = []
    with tf.device('/job:ps/task:0/device:CPU:0'):
      global_step = tf.Variable(0, dtype=tf.int64, name='global_step')
      submitted = tf.Variable(tf.zeros([2], tf.int64), name='sync_replicas_state/submitted')
      for name, shape in sorted(reader.get_variable_to_shape_map().items()):
        if name != 'global_step' and not name.startswith('input_position_'):  # variables
          accumulator = tf.ConditionalAccumulator(dtypes[name], shape=shape,
                                                  shared_name=name + ':0/grad_accum')
          takes.append(accumulator.take_grad(1))
    taken = 0
    with tf.Session(ps_target, config=tf.ConfigProto(device_filters=['/job:ps'])) as sess:
      deadline = time.time() + 60
      while True:
        step, sent = sess.run([global_step.value(), submitted.value()], options=timeout)
        if sent[1] >= step:
          break
        assert time.time() < deadline, 'worker 1 sent no gradient for step %d in 60 s' % step
        time.sleep(0.1)
      kill_chief()
      for take in takes:
        try:
          sess.run(take, options=tf.RunOptions(timeout_in_ms=3000))
          taken += 1
        except tf.errors.DeadlineExceededError:
          pass
  return len(takes), taken


def test_a_synchronous_job_rejoins_its_workers_and_replaces_a_chief_lost_inside_an_update(
    digits_dir, tmp_path):
  """One synchronous job (TF_CONFIG addressing) meets, in turn, the rows of a worker lost,
  of a worker with other flags and of a chief lost:

  1. Worker 1 is preempted (SIGTERM: status 0 at a step boundary, 'leaves: stopped'); the
     job waits for it at that step (2 gradients per update, no backup).
  2. Restarted with another batch size, it refuses before its first step (status 2, one
     line naming the flag with both values and both digests) and leaves for good.
  3. The chief is lost inside its update: frozen (SIGSTOP) while it waits; worker 1,
     restarted with the chief's flags, rejoins at the current step (>= 5) and sends its
     gradient for it; then the chief is killed and the accumulators emptied: the state a
     chief killed inside its update leaves (seen in a full-suite run: the gradients taken,
     global_step not advanced, no tokens handed out, worker 1 waiting for one). With TF's
     optimizer both waited until the step timeout and exited 138 (a stress loop of chief
     kills at random moments hit that state in about 1 run in 7; the parameter server
     logged the accumulators' time step one ahead of global_step).
  4. The restarted chief skips the step in flight and hands every worker a token for the
     next (deployment.sync_replicas); it continues from the step the cluster had reached,
     never below it nor below the checkpoint, and the job ends at its last step, every
     task with status 0.

  The job stands still from worker 1's stop to the chief's restart, so its last step can be
  near: the steps run are what this test costs. (A worker killed (SIGKILL) and restarted
  rejoining a synchronous job: tests/benchmarks/test_chaos.py::
  test_killing_and_restarting_workers_and_the_chief_keeps_every_promise, whose driver checks
  every restarted task's session step, status and log.)"""
  train_dir = tmp_path / 'train'
  last = 20
  flags = train_flags(digits_dir, train_dir, sync_replicas=True, replicas_to_aggregate=2,
                      max_number_of_steps=last, save_interval_secs=1, save_interval_steps=2,
                      step_timeout_secs=90)
  with LocalCluster(1, 2, trainer(flags), str(tmp_path / 'logs'), isolation='none',
                    addressing='tf_config') as cluster:
    worker_1 = cluster.task('worker-1')
    wait_for_step(cluster, 'worker-1', 5)
    cluster.signal('worker-1', signal.SIGTERM)
    assert cluster.wait('worker-1', 30) == 0
    stopped = log_text(worker_1)
    assert_clean_log(stopped)
    assert 'Worker 1 leaves: stopped' in stopped

    cluster.command_line = trainer(flags + ['--batch_size=32'])  # This start's only.
    cluster.start_task('worker-1')
    assert cluster.wait('worker-1', WAIT_SECS) == 2, log_text(worker_1)[-3000:]
    refused = last_start(log_text(worker_1))
    line, = error_lines(refused)
    assert line.startswith('error: worker 1 does not train what the chief trains: '
                           '--batch_size=32 here, --batch_size=16 on the chief (worker 0)')
    assert steps(refused) == []  # Refused before any step.
    assert 'Worker 1 leaves: failed (ConfigError), for good' in refused
    chiefs = re.search(r'Settings every worker must share: digest (\w+)',
                       log_text(cluster.chief))
    assert line.endswith(', %s on the chief)' % chiefs.group(1)), line

    # model.ckpt-2 and -4, saved by step before worker 1 stopped at 5 (by time alone, a
    # quiet machine ran those steps within the first second and saved none before the job
    # stood still waiting for worker 1: the chief saves between steps only).
    wait_for(lambda: checkpoint_steps(train_dir), 'a checkpoint')
    cluster.signal('worker-0', signal.SIGSTOP)
    checkpoint = str(train_dir / ('model.ckpt-%d' % checkpoint_steps(train_dir)[-1]))
    cluster.command_line = trainer(flags)
    cluster.start_task('worker-1')
    wait_for(lambda: ready_steps(last_start(log_text(worker_1))), 'worker 1 to rejoin',
             cluster=cluster)
    assert ready_steps(last_start(log_text(worker_1)))[0] >= 5
    reached = []

    def kill_chief():
      cluster.signal('worker-0', signal.SIGKILL)
      cluster.wait('worker-0', 30)
      reached.append(max(max(steps(log_text(t)) or [0]) for t in cluster.tasks
                         if t.job == 'worker'))

    accumulators, taken = _take_the_gradients_of_a_lost_update(
        'grpc://' + cluster.hosts('ps')[0], checkpoint, kill_chief)
    assert accumulators == 8, (accumulators, taken)
    assert worker_1.process.poll() is None  # Waiting for a token.
    saved = checkpoint_steps(train_dir)[-1]
    cluster.start_task('worker-0')
    _assert_all_exit_0(cluster)
    restarted = last_start(log_text(cluster.chief))
    assert 'from TF_CONFIG' in restarted
    assert 'Rejoining a synchronous job in progress' in restarted
    resumed_at = ready_steps(restarted)[0]
    assert resumed_at >= max(reached[0], saved), (resumed_at, reached, saved)
    later = steps(restarted)
    assert later == sorted(later) and later[-1] == last
    assert 'Worker 1 leaves: finished' in last_start(log_text(worker_1))
  assert checkpoint_steps(train_dir)[-1] == last


def test_a_lost_parameter_server_ends_every_worker_and_the_relaunch_resumes_without_a_damaged_worker(
    digits_dir, tmp_path):
  """Asynchronous. The parameter server is killed after a checkpoint: both workers exit
  138 with one line. Between the runs worker 1's shard (train-00001-of-00004, which only
  it reads) is cut in half: in the relaunch it exits 3 with the line naming the shard,
  telling the parameter server it leaves; the chief resumes from its checkpoint and
  finishes, and the ps exits 0 instead of waiting for worker 1 forever."""
  data = tmp_path / 'digits'
  shutil.copytree(digits_dir, str(data))
  train_dir = tmp_path / 'train'
  flags = train_flags(str(data), train_dir, max_number_of_steps=80, save_interval_secs=1)
  with LocalCluster(1, 2, trainer(flags), str(tmp_path / 'logs')) as cluster:
    wait_for_step(cluster, 'worker-0', 10)
    wait_for(lambda: checkpoint_steps(train_dir)[-1:] >= [5], 'a checkpoint')
    cluster.signal('ps-0', signal.SIGKILL)
    for name in ('worker-0', 'worker-1'):
      status = cluster.wait(name, 60)
      text = log_text(cluster.task(name))
      assert status == 138, '%s exited %s\n%s' % (name, status, text[-3000:])
      assert 'Traceback' not in text
      lines = error_lines(text)
      assert len(lines) == 1 and 'lost the cluster' in lines[0], lines
  saved = checkpoint_steps(train_dir)[-1]
  checkpoint = str(train_dir / ('model.ckpt-%d' % saved))
  # Asynchronous: the file is named at the save's start, the step inside may be later.
  saved_step = int(tf.train.load_checkpoint(checkpoint).get_tensor('global_step'))
  shard = data / 'train-00001-of-00004'
  shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
  with LocalCluster(1, 2, trainer(flags), str(tmp_path / 'logs2')) as cluster:
    assert cluster.wait('worker-1', WAIT_SECS) == 3
    failed = log_text(cluster.task('worker-1'))
    assert 'Traceback' not in failed
    lines = error_lines(failed)
    assert len(lines) == 1 and str(shard) in lines[0] and 'rebuild' in lines[0], lines
    assert 'Worker 1 leaves: failed (DamagedShards)' in failed
    for name in ('worker-0', 'ps-0'):
      status = cluster.wait(name, WAIT_SECS)
      text = log_text(cluster.task(name))
      assert status == 0, '%s exited %s\n%s' % (name, status, text[-3000:])
      assert_clean_log(text, name)
    chief = log_text(cluster.chief)
    assert 'Worker 0 leaves: finished' in chief
    assert 'Resuming from %s' % checkpoint in chief
    assert ready_steps(chief)[0] == saved_step
  # Worker 1 left long before the chief's last step: no asynchronous step after it.
  assert checkpoint_steps(train_dir)[-1] == 80


def test_a_task_that_never_arrives_or_a_worker_lost_for_good_is_named_at_the_time_out(
    digits_dir, tmp_path):
  """One synchronous job (1 ps, 3 workers, 2 gradients per update: one backup worker)
  whose tasks are started in turn:

  1. The ps and worker 1 alone: the chief never arrives; worker 1 waits for it and ends at
     --startup_timeout_secs (138) naming it.
  2. Then the chief and worker 2. Worker 1 (ended) never arrives for them: its backup
     covers it. After step 5 worker 2 is lost for good (SIGKILL, never restarted):
     --replicas_to_aggregate=2 can no longer be met and the chief ends at
     --step_timeout_secs (138) naming both the worker that never arrived and the one
     lost; what its step waits on: its own gradient for the current step is in, the lost
     worker's last one is older, the missing worker never sent one.

  (One job for what took three: the never-arriving chief and worker, and the worker lost
  for good without a backup, were each a cluster of their own.)"""
  flags = dict(sync_replicas=True, replicas_to_aggregate=2, step_timeout_secs=8,
               max_number_of_steps=400)
  train_dir = tmp_path / 'train'
  alone = train_flags(digits_dir, train_dir, startup_timeout_secs=8, **flags)
  cluster = LocalCluster(1, 3, trainer(alone), str(tmp_path / 'logs'))
  try:
    hosts = cluster.hosts('worker')
    cluster.start_task('ps-0')
    cluster.start_task('worker-1')
    status = cluster.wait('worker-1', 120)
    text = log_text(cluster.task('worker-1'))
    assert status == 138, 'worker-1 exited %s\n%s' % (status, text[-3000:])
    assert 'Traceback' not in text
    lines = error_lines(text)
    assert len(lines) == 1, lines
    assert 'the training session was not ready after 8 s' in lines[0], lines
    assert 'not answering: the chief, worker 0 (%s);' % hosts[0] in lines[0], lines
    assert '--startup_timeout_secs' in lines[0], lines

    # The default start-up time-out: worker 2 waits for the chief's first start.
    cluster.command_line = trainer(train_flags(digits_dir, train_dir, **flags))
    cluster.start_task('worker-0')
    cluster.start_task('worker-2')
    wait_for_step(cluster, 'worker-0', 5)
    cluster.signal('worker-2', signal.SIGKILL)
    status = cluster.wait('worker-0', WAIT_SECS)
    text = log_text(cluster.chief)
    assert status == 138, text[-3000:]
    assert 'Traceback' not in text
    line, = error_lines(text)
    assert 'no training step finished for 8 s (--step_timeout_secs)' in line
    assert 'not answering: worker 1 (%s), worker 2 (%s);' % (hosts[1], hosts[2]) in line, line
    assert max(steps(text)) < 400
    # What the step waits on: the chief's gradient for the current step is in, the lost
    # worker's last one is older, the one that never arrived sent none.
    state = re.search(r'at the time-out: global step (\d+), .* last gradient '
                      r'(\d+),(-?\d+),(-?\d+);', line)
    assert state, line
    step, chief_sent, missing_sent, lost_sent = (int(value) for value in state.groups())
    assert chief_sent == step > lost_sent >= 0 and missing_sent == -1, line
  finally:
    cluster.kill()


def test_a_synchronous_job_with_a_backup_worker_goes_on_without_a_worker_lost_for_good(
    digits_dir, tmp_path):
  """3 workers, 2 gradients per update: worker 2 is lost for good (SIGKILL, never
  restarted) after step 5 and training goes on to its last step, the others with status 0.
  Without a backup the chief ends naming it: the test above."""
  flags = train_flags(digits_dir, tmp_path / 'train', max_number_of_steps=30,
                      sync_replicas=True, replicas_to_aggregate=2, step_timeout_secs=8)
  with LocalCluster(1, 3, trainer(flags), str(tmp_path / 'logs')) as cluster:
    wait_for_step(cluster, 'worker-0', 5)
    cluster.signal('worker-2', signal.SIGKILL)
    assert cluster.wait('worker-2', 30) == 128 + signal.SIGKILL  # Lost before the end.
    for name in ('worker-0', 'worker-1'):
      status = cluster.wait(name, WAIT_SECS)
      assert status == 0, log_text(cluster.task(name))[-3000:]
    assert max(steps(log_text(cluster.chief))) == 30


def test_single_process_sigterm_saves_and_a_restart_resumes(digits_dir, tmp_path, caplog):
  """No cluster: SIGTERM ends the run at a step boundary with a checkpoint, status 0; run
  again (in this process: the signal is the point, not the second start), it resumes."""
  train_dir = tmp_path / 'train'
  argv = [sys.executable, TRAIN_SCRIPT] + train_flags(digits_dir, train_dir,
                                                      max_number_of_steps=100000)
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop('TF_CONFIG', None)
  log_path = tmp_path / 'single.log'
  with open(log_path, 'wb') as log:
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               preexec_fn=functools.partial(die_with_parent, os.getpid()))
  try:
    wait_for(lambda: max(steps(log_path.read_text()) or [0]) >= 10, 'step 10')
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, log_path.read_text()[-3000:]
  finally:
    process.kill()
    process.wait()
  text = log_path.read_text()
  assert_clean_log(text)
  assert 'SIGTERM received' in text
  saved = checkpoint_steps(train_dir)[-1]
  assert 10 <= saved < 100000
  # The resumption needs no process of its own: the entry's main, in this one.
  config, _ = config_from_argv(TrainConfig, train_flags(digits_dir, train_dir,
                                                        max_number_of_steps=saved + 5))
  caplog.set_level(logging.INFO, logger='absl')
  assert lifecycle.run_job(lifecycle.resolve_job(config, {})) == 0
  assert ready_steps('\n'.join(r.getMessage() for r in caplog.records)) == [saved]
  assert checkpoint_steps(train_dir)[-1] == saved + 5


# Workers without parameter servers (--variable_update=replicated): every step all-reduces
# every worker's gradients, so one worker lost ends every task (138), named, and the job
# is relaunched whole.
def _all_reduce_flags(digits_dir, train_dir, **overrides):
  values = dict(variable_update='replicated', max_number_of_steps=40, save_interval_steps=5,
                log_every_n_steps=1, step_timeout_secs=8, startup_timeout_secs=8)
  values.update(overrides)
  return train_flags(digits_dir, train_dir, **values)


def _assert_ended_naming(cluster, survivors, missing, reason):
  for name in survivors:
    status = cluster.wait(name, 60)
    text = log_text(cluster.task(name))
    assert status == 138, '%s exited %s\n%s' % (name, status, text[-3000:])
    assert 'Traceback' not in text
    lines = error_lines(text)
    assert len(lines) == 1 and missing in lines[0], lines
    assert reason.search(lines[0]), lines


def test_all_reduce_a_worker_that_never_arrives_is_named_on_every_task(digits_dir, tmp_path):
  """Two jobs without ps side by side: in one worker 1 never starts (the leader waits for
  it), in the other the leader, worker 0, never starts (worker 1 waits for it, which no
  session time-out ends: the watchdog does)."""
  flags = _all_reduce_flags(digits_dir, tmp_path / 'train')
  no_member = LocalCluster(0, 2, trainer(flags), str(tmp_path / 'a'))
  no_leader = LocalCluster(0, 2, trainer(flags), str(tmp_path / 'b'))
  try:
    no_member.start_task('worker-0')
    no_leader.start_task('worker-1')
    reason = re.compile('the training session was not ready after 8 s')
    _assert_ended_naming(no_member, ['worker-0'], 'not answering: worker 1 (%s)'
                         % no_member.hosts('worker')[1], reason)
    _assert_ended_naming(no_leader, ['worker-1'], 'not answering: the chief, worker 0 (%s)'
                         % no_leader.hosts('worker')[0], reason)
  finally:
    no_member.kill()
    no_leader.kill()


def _assert_resumed(cluster, checkpoint_step, train_dir):
  """The chief resumed from model.ckpt-<checkpoint_step>, and every worker started at its
  step (the broadcast)."""
  chief = log_text(cluster.chief)
  assert 'Resuming from %s' % (train_dir / ('model.ckpt-%d' % checkpoint_step)) in chief
  for task in cluster.tasks:
    assert ready_steps(log_text(task))[0] == checkpoint_step, task.name


def test_all_reduce_a_worker_stopped_killed_or_frozen_and_each_relaunch_resumes(
    digits_dir, tmp_path):
  """3 workers without ps, one job relaunched after each of its ends; every relaunch
  resumes from the chief's last checkpoint, every worker at the chief's step (the
  broadcast):

  1. SIGTERM to worker 1 alone (a preempted node): the stop vote at the end of each step
     stops all three after the same step; the chief saves it and everyone exits 0.
  2. Relaunched, it resumes at that step; worker 1 SIGKILLed: the others' collective fails
     at once; both end (138), naming it.
  3. Relaunched, it resumes from the chief's last checkpoint; worker 1 SIGSTOPped: it still
     accepts connections: the others' step times out, and the probe names it.
  (A job without ps trained to its last step: tests/deployment/cluster/
  test_launch_local_allreduce.py.)"""
  train_dir = tmp_path / 'train'
  flags = _all_reduce_flags(digits_dir, train_dir, max_number_of_steps=400)
  reason = re.compile('lost the cluster|no training step finished for 8 s')
  saved = 0
  for run, how in enumerate(('SIGTERM', 'SIGKILL', 'SIGSTOP')):
    with LocalCluster(0, 3, trainer(flags), str(tmp_path / ('logs%d' % run))) as cluster:
      wait_for_step(cluster, 'worker-1', saved + 5)
      if how == 'SIGTERM':
        cluster.signal('worker-1', signal.SIGTERM)
        _assert_all_exit_0(cluster)
        done = {task.name: re.findall(r'Training done at global step (\d+)', log_text(task))
                for task in cluster.tasks}
        assert 'a worker was asked to stop' in log_text(cluster.chief)
        ends = {tuple(steps) for steps in done.values()}
        assert len(ends) == 1, done
        [(stopped,)] = ends
        assert 5 <= int(stopped) < 400
        assert checkpoint_steps(train_dir)[-1] == int(stopped)
      else:
        _assert_resumed(cluster, saved, train_dir)
        wait_for(lambda: checkpoint_steps(train_dir)[-1:] >= [saved + 5], 'a checkpoint')
        cluster.signal('worker-1', getattr(signal, how))
        try:
          _assert_ended_naming(cluster, ('worker-0', 'worker-2'),
                               'worker 1 (%s)' % cluster.hosts('worker')[1], reason)
        finally:
          cluster.signal('worker-1', signal.SIGCONT)
          cluster.signal('worker-1', signal.SIGKILL)
    saved = checkpoint_steps(train_dir)[-1]
