"""training/lifecycle.py without processes: resolving a job against the legacy flags,
the stop signals, and the one-line messages of cluster failures."""

import json
import os
import signal

import pytest

from tf_compat import tf
from training import lifecycle
from training.config import TrainConfig
from core.params import ConfigError

PS = ('10.0.0.1:2222',)
WORKERS = ('10.0.0.2:2222', '10.0.0.3:2222')


def config(**overrides):
  return TrainConfig(dataset_name='digits', dataset_dir='/data', model_name='lenet',
                     train_dir='/tmp/t', **overrides)


def test_no_cluster_keeps_the_config():
  job = lifecycle.resolve_job(config(worker_replicas=2, num_ps_tasks=1, task=1,
                                     master='grpc://x:1'))
  assert job.task is None and job.config.master == 'grpc://x:1'


def test_a_worker_gets_its_deployment_fields_from_the_cluster():
  job = lifecycle.resolve_job(config(ps_hosts=PS, worker_hosts=WORKERS, job_name='worker',
                                     task_index=1, sync_replicas=True,
                                     replicas_to_aggregate=2))
  assert (job.config.worker_replicas, job.config.num_ps_tasks, job.config.task) == (2, 1, 1)
  assert not job.config.is_chief and job.task.task_index == 1
  # Fields equal to the cluster's, given explicitly, are accepted.
  same = lifecycle.resolve_job(config(ps_hosts=PS, worker_hosts=WORKERS, job_name='worker',
                                      task_index=1, worker_replicas=2, num_ps_tasks=1,
                                      task=1))
  assert (same.config.worker_replicas, same.config.num_ps_tasks, same.config.task) == (2, 1, 1)


def test_tf_config_places_the_chief_first():
  text = json.dumps({'cluster': {'chief': [WORKERS[0]], 'worker': [WORKERS[1]], 'ps': PS},
                     'task': {'type': 'chief', 'index': 0}})
  job = lifecycle.resolve_job(config(), {'TF_CONFIG': text})
  assert job.config.is_chief and job.config.worker_replicas == 2


def test_a_parameter_server_needs_no_training_fields():
  job = lifecycle.resolve_job(TrainConfig(ps_hosts=PS, worker_hosts=WORKERS, job_name='ps'))
  assert job.task.is_ps


@pytest.mark.parametrize('overrides, message', [
    (dict(master='grpc://a:1'), '--master=grpc://a:1 conflicts with the cluster'),
    (dict(worker_replicas=3), '--worker_replicas=3 conflicts with the cluster, which has 2 '
     'workers (flags); drop --worker_replicas'),
    (dict(num_ps_tasks=2), '--num_ps_tasks=2 conflicts with the cluster, which has 1 '
     'parameter servers'),
    (dict(task=2), '--task=2 conflicts with the cluster, where this task is worker 1'),
    (dict(job_name='evaluator'), '--job_name=evaluator is not a training job'),
    (dict(step_timeout_secs=-1.0), '--step_timeout_secs=-1.0 must be >= 0'),
])
def test_conflicts_are_config_errors(overrides, message):
  values = dict(ps_hosts=PS, worker_hosts=WORKERS, job_name='worker', task_index=1)
  values.update(overrides)
  with pytest.raises(ConfigError) as error:
    lifecycle.resolve_job(config(**values))
  assert message in str(error.value)


def test_stop_signals_set_the_event_and_restore_the_handlers():
  before = signal.getsignal(signal.SIGTERM)
  with lifecycle.StopSignals() as event:
    assert not event.is_set()
    os.kill(os.getpid(), signal.SIGTERM)
    assert event.wait(30)
  assert signal.getsignal(signal.SIGTERM) is before


def test_cluster_failure_message_names_the_task_and_the_cause():
  task = lifecycle.task_spec.resolve_task(PS, WORKERS, 'worker', 0)
  error = tf.errors.UnavailableError(None, None, (
      'Graph execution error:\n\nDetected at node x\n/job:ps/replica:0/task:0: '
      'Socket closed\nAdditional GRPC error information'))
  message = lifecycle._cluster_failure_message(error, task)  # pylint: disable=protected-access
  assert message.startswith('lost the cluster (UnavailableError from /job:ps/task:0 '
                            '(10.0.0.1:2222): /job:ps/replica:0/task:0: Socket closed)')
  assert '\n' not in message and 'docs/cluster.md' in message


def test_a_host_that_never_resolves_is_a_retryable_cluster_failure(capsys):
  """A peer pod not scheduled yet has no DNS name: after --startup_timeout_secs the task
  ends with one line naming the host and 138 (retried), not 2 (a permanent mistake)."""
  job = lifecycle.resolve_job(config(
      ps_hosts=('no-such-host.invalid:2222',), worker_hosts=('127.0.0.1:2223',),
      job_name='worker', startup_timeout_secs=0.5))
  assert lifecycle.run_job(job) == lifecycle.EXIT_CLUSTER_FAILURE
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "error: ps 0's host no-such-host.invalid does not resolve"), lines
