"""deployment.launch_local running the real trainer: whole ps clusters on 127.0.0.1, real
processes, one log per task. 2 synchronous workers of batch b update like ONE worker of
batch 2b (tests/global_batch.py: the reference and its bound); SIGTERM stops the whole job
cleanly with a final checkpoint; the end of training ends every task with 0, asynchronous
or with a backup worker; and the tasks listen only inside their private network namespace.
The launcher's supervision on stand-in tasks, and its mistakes:
tests/deployment/cluster/test_launch_local_supervision.py; without ps (all-reduce):
tests/deployment/cluster/test_launch_local_allreduce.py.
"""

import functools
import glob
import os
import re
import shutil
import socket
import signal
import subprocess
import sys

import numpy as np
import pytest

from deployment import sync_replicas
from deployment.cluster.launch_local import LocalCluster
from tests.cluster_tasks import (ROOT, assert_clean_log, checkpoint_steps, chief_scalars,
                                 leave_counts, steps, train_flags, wait_for, WAIT_SECS)
from tests.global_batch import STEPS, assert_equivalent
from tests.launch_local_runs import (environment, fake_task_command, launcher_argv,
                                     shared_sync_reference)
from tests import leftovers
from tf_compat import tf
from training.train import SYNC_TRACE_FILE

# Where the model is not the point (a stop, a backup worker's end), softmax regression:
# LeNet's millions of weights cost every step its compute and its round trip through the
# ps. The asynchronous run keeps LeNet, whose size its traffic check reads.
SMALL_MODEL = 'softmax_regression'

@pytest.mark.cluster
def test_two_sync_workers_of_batch_b_update_like_one_worker_of_batch_2b(tmp_path,
                                                                      tmp_path_factory):
  train_dir = tmp_path / 'cluster'
  flags, reference, start = shared_sync_reference(tmp_path_factory, train_dir)
  log_flag = '--task_log_dir=%s' % (train_dir / 'logs')
  result = subprocess.run(launcher_argv(1, 2, flags, log_flag), cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=WAIT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'ps-0: 0, worker-0: 0, worker-1: 0' in result.stdout, result.stdout
  _check_run_logs(train_dir)
  # Each update took one gradient from each worker, computed at the update's step.
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  assert trace == [sync_replicas.TraceLine(step, [1, 1], [step, step])
                   for step in range(STEPS)], trace
  assert_equivalent(str(train_dir / ('model.ckpt-%d' % STEPS)), reference, start)


def _check_run_logs(train_dir):
  """One log per task, each clean; per-worker throughput; the ps left on its own; only
  the chief wrote events."""
  logs = {os.path.basename(p): open(p).read() for p in glob.glob(str(train_dir / 'logs'
                                                                     '/*.log'))}
  assert sorted(logs) == ['ps-0.log', 'worker-0.log', 'worker-1.log']
  for name, text in logs.items():
    assert_clean_log(text, name)
  for name in ('worker-0.log', 'worker-1.log'):
    assert 'examples/sec' in logs[name] and steps(logs[name]) == [STEPS], logs[name]
  assert 'All 2 workers left: parameter server 0 exits' in logs['ps-0.log']
  assert len(glob.glob(str(train_dir / 'events.out.tfevents.*'))) == 1
  assert checkpoint_steps(train_dir)[-1] == STEPS
  # Every gradient was taken: nothing is counted as stale, anywhere.
  trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
  stale = _check_cluster_view(train_dir, logs, trace, replicas_to_aggregate=2)
  assert stale == [0, 0]


def _check_cluster_view(train_dir, logs, trace=None, replicas_to_aggregate=None):
  """The chief's cluster/... scalars against independent counts; returns each worker's
  final stale count (None for asynchronous workers).

  Each worker's leaving line gives the steps its own process ran and what the parameter
  servers counted for it (deployment.worker_stats). Synchronous (`trace`: the chief's
  record of what each update took): per worker, steps = gradients taken + stale; the
  chief's stale figures never fall, add up per step and end at most at the final total.
  The chief's step counts (cluster/worker_<i>/steps, read with the global step their
  scalars are written at) between its first and last reading: per worker at most the
  steps it ran, and the rates agree with them; together at least replicas_to_aggregate
  per update (sync) or the global steps' advance (async), up to one step in flight per
  worker at each reading (a worker's count follows its update). All counts: no figure
  here depends on how long anything took."""
  workers = sorted(int(n.split('-')[1].split('.')[0]) for n in logs if n.startswith('worker'))
  counts = [leave_counts(logs['worker-%d.log' % i]) for i in workers]
  scalars = chief_scalars(train_dir)
  for local, counted, _ in counts:
    assert local == counted, counts  # No stop token here: every step counted.
  counted = [scalars['cluster/worker_%d/steps' % i] for i in workers]
  rates = [scalars['cluster/worker_%d/steps_per_sec' % i] for i in workers]
  assert len({len(events) for events in counted + rates}) == 1 and rates[0], sorted(scalars)
  done = [int(events[-1][2] - events[0][2]) for events in counted]
  for (local, _, _), total in zip(counts, done):
    assert 0 <= total <= local, (done, counts)
  for events, rate_events in zip(counted, rates):  # A rate > 0 exactly where steps were done.
    assert [b[2] > a[2] for a, b in zip(events, events[1:])] == [
        r[2] > 0 for r in rate_events[1:]], (events, rate_events)
  advance = counted[0][-1][1] - counted[0][0][1]  # Global steps between the readings.
  if trace is None:
    assert not any(tag.endswith('stale_gradients') for tag in scalars)
    assert abs(sum(done) - advance) <= 2 * len(workers), (done, counted)
    return [stale for _, _, stale in counts]
  assert sum(done) >= replicas_to_aggregate * advance - 2 * len(workers), (done, counted)
  taken = [sum(line.counts[i] for line in trace) for i in workers]
  assert [local - stale for local, _, stale in counts] == taken, (counts, trace)
  total = [value for _, _, value in scalars['cluster/stale_gradients']]
  assert total == sorted(total) and min(total) >= 0, total
  per_step = zip(*[scalars['cluster/worker_%d/stale_gradients' % i] for i in workers])
  assert [sum(v for _, _, v in row) for row in per_step] == total
  assert total[-1] <= sum(stale for _, _, stale in counts)
  return [stale for _, _, stale in counts]


def _check_traffic(train_dir, logs):
  """Each worker's first-step traffic line (deployment.trace.traffic, from the step's trace)
  against the model's size read from the checkpoint: the step reads every variable once
  and sends one gradient per trainable variable (float32), plus a few scalars."""
  reader = tf.train.load_checkpoint(str(train_dir))
  shapes = reader.get_variable_to_shape_map()
  model_bytes = 4 * sum(int(np.prod(shape)) for name, shape in shapes.items()
                        if name != 'global_step')
  assert model_bytes > 1e6  # LeNet: millions of weights.
  for name, text in logs.items():
    if name.startswith('worker'):
      found = re.findall(r'Traffic: this step received ([\d.]+) MB \(job:ps/task:0 [\d.]+ MB\) '
                         r'and sent ([\d.]+) MB \(job:ps/task:0 ([^)]*)\)', text)
      assert len(found) == 1, text[-3000:]
      received, sent, sent_to_ps = found[0]
      assert abs(float(received) * 1e6 - model_bytes) <= 0.01e6, (found, model_bytes)
      # What the parameter servers received is in their own records of the step, which a
      # traced step does not always carry whole (deployment.trace.traffic; seen: all, all but
      # 0.25 MB, none): when recorded, never more than the model.
      if sent_to_ps != 'not recorded':
        assert float(sent) * 1e6 <= model_bytes + 0.01e6, (found, model_bytes)


def _check_worker_lines(logs, num_workers):
  """Each worker's one clone ran on its own CPU, not on the ps that holds its variables;
  only the chief names a checkpoint at the end."""
  for index in range(num_workers):
    text = logs['worker-%d.log' % index]
    ran_on = re.findall(r'Placement: clone 0: asked \S+, ran on (\S+) \(', text)
    assert (len(ran_on) == 1
            and ran_on[0].startswith('/job:worker/replica:0/task:%d/device:' % index)), ran_on
    done = re.findall(r'Training done at global step \d+; (.*)', text)
    assert len(done) == 1, text[-3000:]
    if index == 0:
      assert done[0].startswith('checkpoint ') and 'model.ckpt-' in done[0], done
    else:
      assert done == ['checkpoints are written by the chief (worker 0)'], done



@pytest.mark.cluster
def test_sigterm_stops_the_whole_job_cleanly_with_a_final_checkpoint(digits_dir, tmp_path):
  """Synchronous, so a worker that stops first leaves the other waiting for a token. That
  a job stopped so resumes at its saved step when launched again is the trainer's, checked
  with 1 ps + 2 synchronous workers stopped by SIGTERM and started again under Slurm
  (tests/configs/test_slurm_requeue.py: the chief ready at the step saved, the job on to
  its end) and relaunched on LocalCluster after its ps was lost
  (tests/training/test_cluster_failures.py: the relaunch resumes at the saved step).
  While it trains, before the SIGTERM, its parameter server (the launcher's default
  isolation) listens only inside the private network namespace
  (_check_the_ps_listens_only_inside; a port not isolated, and the skip where no namespace
  can be made: test_tasks_listen_only_inside_the_private_namespace)."""
  train_dir = tmp_path / 'train'
  flags = train_flags(digits_dir, train_dir, sync_replicas=True, replicas_to_aggregate=2,
                      max_number_of_steps=100000, model_name=SMALL_MODEL)
  log_dir = tmp_path / 'logs'
  process = subprocess.Popen(launcher_argv(1, 2, flags, '--task_log_dir=%s' % log_dir),
                             cwd=ROOT, env=environment(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid()))
  try:
    startup = process.stdout.readline()
    chief_log = log_dir / 'worker-0.log'
    wait_for(lambda: chief_log.exists() and max(steps(chief_log.read_text()) or [0]) >= 10,
             'chief step 10')
    _check_the_ps_listens_only_inside(startup, train_dir)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=WAIT_SECS)
    output = startup + output
  finally:
    process.kill()
    process.wait()
  assert process.returncode == 0, output
  assert 'ps-0: 0, worker-0: 0, worker-1: 0' in output, output
  chief = chief_log.read_text()
  assert_clean_log(chief)
  assert 'SIGTERM received' in chief and 'Saving the final checkpoint' in chief
  assert checkpoint_steps(train_dir)[-1] >= 10


def _check_the_ps_listens_only_inside(startup, train_dir):
  """TensorFlow binds *:port (seen inside the namespace, entered at the ps's own process);
  isolated, that port does not exist on the host at all. (A host without namespaces, where
  the launcher's `auto` runs the job NOT isolated, or without ss: nothing to check here,
  and test_tasks_listen_only_inside_the_private_namespace skips saying why.)"""
  if 'NOT isolated' in startup or not shutil.which('ss'):
    return
  assert 'reachable only from inside it' in startup, startup
  port = int(re.search(r'\(ports: ps (\d+);', startup).group(1))
  pid, = [int(path.split('/')[2]) for path in glob.glob('/proc/[0-9]*/cmdline')
          if _cmdline(path).startswith(sys.executable) and '--job_name=ps' in _cmdline(path)
          and '--train_dir=%s' % train_dir in _cmdline(path)]
  assert _host_listens(port) == []
  with pytest.raises(ConnectionRefusedError):
    socket.create_connection(('127.0.0.1', port), timeout=5)
  inside = subprocess.run(['nsenter', '--target', str(pid), '--net', 'ss', '-ltnH'],
                          capture_output=True, text=True, check=True).stdout
  assert '*:%d' % port in inside, inside


def _cmdline(path):
  try:
    with open(path, 'rb') as handle:
      return handle.read().replace(b'\0', b' ').decode(errors='replace')
  except OSError:
    return ''   # Ended meanwhile.


@pytest.mark.cluster
@pytest.mark.parametrize('num_workers, sync_flags, mode', [
    (2, {}, 'async'),
    (3, {'sync_replicas': True, 'replicas_to_aggregate': 2, 'sync_trace': True,
         'model_name': SMALL_MODEL}, 'one backup worker'),
])
def test_the_end_of_training_ends_every_task_with_0(digits_dir, tmp_path, num_workers,
                                                    sync_flags, mode):
  """Asynchronous workers, and synchronous ones with a backup worker (whose gradient for
  each step comes too late and is dropped), reach the last step; every task, the ps
  included, exits 0 on its own with a clean log."""
  steps_wanted = 20
  train_dir = tmp_path / 'train'
  flags = train_flags(digits_dir, train_dir, max_number_of_steps=steps_wanted, **sync_flags)
  result = subprocess.run(launcher_argv(1, num_workers, flags,
                                        '--task_log_dir=%s' % (train_dir / 'logs')),
                          cwd=ROOT, env=environment(), capture_output=True, text=True,
                          timeout=WAIT_SECS)
  assert result.returncode == 0, result.stdout + result.stderr
  statuses = ', '.join(['ps-0: 0'] + ['worker-%d: 0' % i for i in range(num_workers)])
  assert statuses in result.stdout, (mode, result.stdout)
  logs = {os.path.basename(p): open(p).read()
          for p in glob.glob(str(train_dir / 'logs' / '*.log'))}
  assert len(logs) == num_workers + 1
  for name, text in logs.items():
    assert_clean_log(text, name)
  assert 'All %d workers left: parameter server 0 exits' % num_workers in logs['ps-0.log']
  _check_worker_lines(logs, num_workers)
  if sync_flags:
    assert 'Synchronous with 1 backup worker(s)' in logs['worker-0.log']
    # With a backup worker there is no big-batch equivalence; what holds is that each
    # update takes at least 2 gradients, at most one per worker (a backup worker's that
    # arrives before the chief takes them is averaged in), all computed at the update's step.
    trace = sync_replicas.read_trace(str(train_dir / SYNC_TRACE_FILE))
    assert [line.step for line in trace] == list(range(steps_wanted)), trace
    for line in trace:
      assert max(line.counts) == 1 and sum(line.counts) >= 2, line
      assert all(s == line.step for s, c in zip(line.steps, line.counts) if c), line
    # The chief's view: each worker's step rate, the gradients dropped as stale.
    _check_cluster_view(train_dir, logs, trace, replicas_to_aggregate=2)
  else:
    _check_cluster_view(train_dir, logs)
    _check_traffic(train_dir, logs)
  # Asynchronous workers each add 1 to global_step without waiting for the others, so
  # the ones already inside their last step may carry it past the end, by at most one
  # step per other worker; synchronous training lands on it exactly.
  overshoot = 0 if sync_flags else num_workers - 1
  assert steps_wanted <= checkpoint_steps(train_dir)[-1] <= steps_wanted + overshoot
  assert len(glob.glob(str(train_dir / 'events.out.tfevents.*'))) == 1


def _host_listens(port):
  if not shutil.which('ss'):
    pytest.skip('ss (iproute2) is not installed')
  output = subprocess.run(['ss', '-ltnH'], capture_output=True, text=True, check=True).stdout
  return [line.split()[3] for line in output.splitlines()
          if line.split()[3].rsplit(':', 1)[1] == str(port)]


@pytest.mark.cluster
def test_tasks_listen_only_inside_the_private_namespace(tmp_path):
  """TensorFlow binds *:port; isolated, that port does not exist on the host at all: a real
  parameter server's, checked on the SIGTERM test's job while it trains
  (_check_the_ps_listens_only_inside). Not isolated, a task's port on all interfaces is the
  host's (a stand-in that listens as TensorFlow does: tests/launch_local_runs.py)."""
  isolated = LocalCluster(1, 1, ['true'], str(tmp_path / 'isolated'), isolation='auto')
  exposed = LocalCluster(1, 1, fake_task_command(tmp_path / 'stand_in', 'ps-0:listen', 2),
                         str(tmp_path / 'exposed'), isolation='none')
  try:
    isolated.isolate()
    if isolated.network is None:
      pytest.skip('no private network namespace here: %s' % isolated.isolation_note)
    exposed.isolate()
    assert 'reachable only from inside it' in isolated.startup_line()
    assert 'NOT isolated' in exposed.startup_line()
    exposed.start_task('ps-0')
    log_path = exposed.task('ps-0').log_path
    wait_for(lambda: 'ps-0 listening' in open(log_path).read(), 'the stand-in ps',
             cluster=exposed)
    exposed_port = exposed.task('ps-0').port
    assert _host_listens(exposed_port) == ['*:%d' % exposed_port]  # All interfaces.
  finally:
    isolated.kill()
    exposed.kill()
