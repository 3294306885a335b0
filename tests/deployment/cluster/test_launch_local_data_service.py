"""deployment.cluster.launch_local with a tf.data service (--num_data_workers): the dispatcher and
data workers start first as `python -m datasets.data_service` commands, the training tasks
get --data_service_address, a data worker or dispatcher that dies is restarted on its port
(the dispatcher with its journal), past its restarts a data worker is one line, the last
data worker gone ends the job with the chief's 138, and the service ends with the job
(SIGTERM, status 0). The
real trainer (LeNet on digits; softmax regression where the job ends by the step
time-out) runs as the tasks."""

import os
import sys
import threading

import pytest

from deployment.cluster import launch_local
from deployment.cluster.launch_local import LocalCluster
from tests.cluster_tasks import last_start, log_text, steps, train_flags, trainer, wait_for


def test_service_tasks_come_first_and_the_trainers_get_the_address(tmp_path):
  cluster = LocalCluster(1, 2, [sys.executable, 'trainer.py', '--x=1'], str(tmp_path),
                         isolation='none', num_data_workers=2)
  assert [t.name for t in cluster.tasks] == ['dispatcher-0', 'data_worker-0',
                                             'data_worker-1', 'ps-0', 'worker-0', 'worker-1']
  address = cluster.service_address
  dispatcher = cluster.command(cluster.task('dispatcher-0'))
  assert dispatcher[1:] == ['-m', 'datasets.data_service', '--port=' + address.split(':')[1],
                            '--role=dispatcher', '--work_dir=%s/data_service' % tmp_path]
  worker = cluster.command(cluster.task('data_worker-1'))
  port = cluster.task('data_worker-1').port
  assert worker[-3:] == ['--role=worker', '--dispatcher_address=' + address,
                         '--worker_address=127.0.0.1:%d' % port]
  assert '--data_service_address=' + address in cluster.command(cluster.task('worker-1'))
  assert '--data_service_address=' + address in cluster.command(cluster.task('ps-0'))
  assert cluster.training_tasks() == cluster.tasks[3:]
  # The service tasks find `-m datasets.data_service` from any working directory.
  root = cluster._environment(cluster.task('dispatcher-0'))['PYTHONPATH'].split(os.pathsep)[0]
  assert os.path.isfile(os.path.join(root, 'datasets', 'data_service.py')), root


def _kill_when_training(cluster, names):
  """Kills each task in `names` once the chief has logged 10 steps more than when the
  previous one was killed (and once the restarted dispatcher answers)."""
  chief, seen = cluster.chief, 0
  last_step = lambda: (steps(log_text(chief)) or [0])[-1]
  for name in names:
    wait_for(lambda: last_step() >= seen + 10 or chief.returncode is not None,
             'chief steps before killing ' + name, cluster=cluster)
    if name == 'data_worker-1':
      # The restarted dispatcher has its data workers back (its own log: the chief notes
      # the outage only when it outlasts a poll, and a quick restart need not).
      dispatcher = cluster.task('dispatcher-0')
      wait_for(lambda: dispatcher.starts > 1 and 'registered' in last_start(
          log_text(dispatcher)) or chief.returncode is not None, 'the restarted dispatcher',
               cluster=cluster)
    seen = last_step()
    cluster.task(name).process.kill()


def _run_killing(digits_dir, tmp_path, max_steps, names, num_data_workers=2,
                 model_name='lenet'):
  """-> (the launcher's status, the cluster) of 1 ps + 1 worker with `num_data_workers`
  data workers, the tasks `names` killed in turn while it trains (_kill_when_training)."""
  # A data worker that needs its next split while the dispatcher is down waits for the
  # restarted one, which took 9 to 16 s under the suite's load: the time-out must be
  # longer, or the watchdog ends the job during the restart (seen with 8 s).
  flags = train_flags(digits_dir, tmp_path / 'train', max_number_of_steps=max_steps,
                      step_timeout_secs=25, model_name=model_name)
  with LocalCluster(1, 1, trainer(flags), str(tmp_path / 'logs'), isolation='none',
                    num_data_workers=num_data_workers) as cluster:
    killer = threading.Thread(target=_kill_when_training, args=(cluster, names))
    killer.start()
    status = cluster.supervise(lambda: False, grace_secs=30)
    killer.join()
  return status, cluster


@pytest.mark.cluster
@pytest.mark.slow
def test_a_lost_data_worker_and_the_dispatcher_are_restarted_and_the_job_ends(digits_dir,
                                                                             tmp_path,
                                                                             capsys):
  """Data worker 0, then the dispatcher, killed: each is restarted on its port, and the
  job trains through the end of the epoch (which waits for every data worker the
  dispatcher had) to its last step, every task exiting 0."""
  # LeNet's steps, not softmax regression's: the job must outlast the restarted tasks'
  # start-up (a TensorFlow import). With softmax regression's the 120 steps ended about a
  # second after the dispatcher's kill, on a loaded machine before the restarted dispatcher
  # and data worker had started serving: both were ended mid-import (143), and the restarts
  # had served nothing.
  status, cluster = _run_killing(digits_dir, tmp_path, 120, ['data_worker-0', 'dispatcher-0'])
  out = capsys.readouterr().out
  assert status == 0, out
  assert 'data_worker-0 exited with status 137; restarting it on port %d (log:' % (
      cluster.task('data_worker-0').port) in out, out
  assert 'the dispatcher exited with status 137; restarting it on port' in out, out
  assert {t.name: t.returncode for t in cluster.tasks} == {
      'dispatcher-0': 0, 'data_worker-0': 0, 'data_worker-1': 0, 'ps-0': 0, 'worker-0': 0}
  chief = log_text(cluster.chief)
  assert 'Input: batches from the tf.data service at %s' % cluster.service_address in chief
  assert (steps(chief) or [0])[-1] == 120, chief[-3000:]


@pytest.mark.cluster
@pytest.mark.slow
def test_when_no_data_worker_is_left_the_chief_ends_in_one_line(digits_dir, tmp_path,
                                                                 capsys, monkeypatch):
  """Past its restarts (none here) the only data worker is lost: the chief ends after
  --step_timeout_secs with one line and 138, and so does the job. (A data worker lost
  and restarted while the job trains on: the test above.)"""
  monkeypatch.setattr(launch_local, 'MAX_SERVICE_RESTARTS', 0)
  # Softmax regression: the model is not the point, and LeNet's millions of weights cost
  # every step its compute and its round trip through the ps.
  status, cluster = _run_killing(digits_dir, tmp_path, 100000, ['data_worker-0'],
                                 num_data_workers=1, model_name='softmax_regression')
  out = capsys.readouterr().out
  assert status == 138, out
  assert ('data_worker-0 exited with status 137, restarted 0 times already; training goes '
          'on without it to the end of the epoch') in out, out
  assert {t.name: t.returncode for t in cluster.tasks} == {
      'dispatcher-0': 0, 'data_worker-0': 137, 'ps-0': 0, 'worker-0': 138}
  chief = log_text(cluster.chief)
  errors = [line for line in chief.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and 'no input comes' in errors[0], chief[-3000:]
