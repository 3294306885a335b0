"""deployment/cluster/jobset_env.py: a JobSet pod's environment gives its task, and mistakes in it
one line naming the variable; find_task reads it when nothing else describes a
cluster; a cluster of tasks that see exactly the environment the manifest gives its pods
(tests/jobset_pods.py), their names resolving to loopback, trains to the end, with the
ps manifest's parameter server and with the all-reduce variant's workers alone; and the
manifest's data-service pods, run the same way, register."""

import functools
import collections
import glob
import os
import signal
import subprocess
import sys

import pytest

from core.params import config_from_argv
from deployment.cluster import addressing, jobset_env
from deployment.cluster.task_spec import ClusterError
from deployment.cluster.launch_local import LocalCluster
from deployment.cluster.netns import NamespaceUnavailable, PrivateNetwork
from tests.data_service import READY, wait_for as wait_until
from tests import jobset_pods
from tests.cluster_tasks import (assert_clean_log, checkpoint_steps, log_text, train_flags,
                                 trainer)
from tests import leftovers
from training.config import TrainConfig

POD = {'JOBSET_NAME': 'js', 'REPLICATED_JOB_NAME': 'worker', 'JOB_INDEX': '1',
       'JOB_COMPLETION_INDEX': '0', 'REPLICATED_JOB_REPLICAS': '3',
       'SLIMDEPLOY_TASKS': 'ps=2,worker=3', 'SLIMDEPLOY_BASE_PORT': '2222'}
# The runs' model: the pods' environment is the point, and softmax regression's graph,
# steps and checkpoint are a fraction of train_flags' LeNet's.
SMALL_MODEL = 'softmax_regression'


def task(**changes):
  env = dict(POD, **changes)
  return jobset_env.task_from_environ({k: v for k, v in env.items() if v is not None})


def test_a_worker_pod_finds_every_task_at_its_jobset_name_and_port():
  spec = task()
  assert spec.ps_hosts == ('js-ps-0-0.js:2222', 'js-ps-1-0.js:2223')
  assert spec.worker_hosts == ('js-worker-0-0.js:2224', 'js-worker-1-0.js:2225',
                               'js-worker-2-0.js:2226')
  assert (spec.job_name, spec.task_index, spec.source) == ('worker', 1, 'JobSet')
  assert task(JOB_INDEX='0').is_chief and not task(REPLICATED_JOB_NAME='ps',
                                                   REPLICATED_JOB_REPLICAS='2').is_chief


def test_pods_of_one_indexed_job_count_within_their_job_and_a_subdomain_is_used():
  spec = task(SLIMDEPLOY_TASKS='ps=1,worker=2x3', REPLICATED_JOB_REPLICAS='2',
              JOB_INDEX='1', JOB_COMPLETION_INDEX='2', JOBSET_SUBDOMAIN='net')
  assert spec.task_index == 5 and spec.address == 'js-worker-1-2.net:2228'
  assert spec.worker_hosts[:4] == ('js-worker-0-0.net:2223', 'js-worker-0-1.net:2224',
                                   'js-worker-0-2.net:2225', 'js-worker-1-0.net:2226')


def test_a_jobset_without_ps_is_a_cluster_of_workers_from_the_base_port():
  spec = task(SLIMDEPLOY_TASKS='worker=3', JOB_INDEX='2')
  assert spec.ps_hosts == ()
  assert spec.worker_hosts == ('js-worker-0-0.js:2222', 'js-worker-1-0.js:2223',
                               'js-worker-2-0.js:2224')
  assert (spec.job_name, spec.task_index, spec.num_ps) == ('worker', 2, 0)
  assert task(SLIMDEPLOY_TASKS='worker=3', JOB_INDEX='0').is_chief
  assert addressing.find_task('auto', NO_FLAGS, dict(POD, SLIMDEPLOY_TASKS='worker=3')) == (
      task(SLIMDEPLOY_TASKS='worker=3'))


def test_without_jobset_name_there_is_no_jobset():
  assert task(JOBSET_NAME=None) is None and task(JOBSET_NAME='') is None


@pytest.mark.parametrize('changes, words', [
    ({'SLIMDEPLOY_TASKS': None}, 'SLIMDEPLOY_TASKS is not set in this JobSet pod'),
    ({'JOB_INDEX': None}, 'JOB_INDEX is not set in this JobSet pod (JOBSET_NAME=js)'),
    ({'JOB_COMPLETION_INDEX': None}, "JOB_COMPLETION_INDEX is not set"),
    ({'SLIMDEPLOY_TASKS': 'ps=2,workers=3'}, "'workers=3' is not ROLE=JOBS"),
    ({'SLIMDEPLOY_TASKS': 'ps=2,ps=1,worker=3'}, "'ps=1' is not ROLE=JOBS"),
    ({'SLIMDEPLOY_TASKS': 'ps=0,worker=3'}, "'ps=0' is not ROLE=JOBS"),
    ({'SLIMDEPLOY_TASKS': 'ps=2'}, 'SLIMDEPLOY_TASKS=ps=2 has no worker: a cluster needs '
                                   'workers, with or without ps'),
    ({'SLIMDEPLOY_TASKS': 'worker=3', 'REPLICATED_JOB_NAME': 'ps'},
     'REPLICATED_JOB_NAME=ps but SLIMDEPLOY_TASKS=worker=3 has no ps'),
    ({'REPLICATED_JOB_NAME': 'evaluator'}, 'REPLICATED_JOB_NAME=evaluator is not a training'),
    ({'JOB_INDEX': '3'}, 'JOB_INDEX=3 is not an integer in 0..2'),
    ({'JOB_COMPLETION_INDEX': '1'}, 'JOB_COMPLETION_INDEX=1 is not an integer in 0..0'),
    ({'JOB_INDEX': '-1'}, 'JOB_INDEX=-1 is not an integer'),
    ({'REPLICATED_JOB_REPLICAS': '4'}, 'REPLICATED_JOB_REPLICAS=4 but SLIMDEPLOY_TASKS=ps=2,'
                                       'worker=3 gives worker 3 Jobs'),
    ({'SLIMDEPLOY_BASE_PORT': '65533'}, 'SLIMDEPLOY_BASE_PORT=65533 is not an integer in '
                                        '1..65531'),
    ({'SLIMDEPLOY_BASE_PORT': 'grpc'}, 'SLIMDEPLOY_BASE_PORT=grpc'),
])
def test_a_mistake_is_one_line_naming_the_variable(changes, words):
  with pytest.raises(ClusterError) as raised:
    task(**changes)
  assert words in str(raised.value) and '\n' not in str(raised.value)


NO_FLAGS = ((), (), None, 0)


def test_find_task_reads_the_jobset_environment_when_nothing_else_is_given():
  assert addressing.find_task('auto', NO_FLAGS, POD) == task()
  assert addressing.find_task('auto', NO_FLAGS, {}) is None
  assert addressing.find_task('jobset', NO_FLAGS, POD) == task()
  flags = addressing.find_task('auto', (['a:1'], ['b:1'], 'worker', 0), POD)
  assert flags.source == 'flags'   # Given flags (or TF_CONFIG) win in 'auto'.


@pytest.mark.parametrize('name, host_flags, environ, words', [
    ('jobset', NO_FLAGS, {}, '--addressing=jobset found no cluster: it needs a JobSet pod'),
    ('jobset', (['a:1'], ['b:1'], 'ps', 0), POD,
     'drop --ps_hosts/--worker_hosts/--job_name/--task_index'),
    ('auto', ((), (), None, 1), POD, '--task_index=1 needs --ps_hosts'),
    ('slurmish', NO_FLAGS, POD, '--addressing=slurmish is not known; valid: auto, flags, '
                                'tf_config, slurm, jobset'),
])
def test_find_task_refuses_conflicting_addressing(name, host_flags, environ, words):
  with pytest.raises(ClusterError, match=words.replace('(', r'\(')):
    addressing.find_task(name, host_flags, environ)


class JobSetPods(LocalCluster):
  """A LocalCluster whose tasks see exactly their JobSet pod's environment (on top of this
  process's, without its TF_CONFIG and JobSet variables), in a private network and mount
  namespace where every pod's name is 127.0.0.1."""

  def __init__(self, pods, command, log_dir):
    counts = collections.Counter(pod.replicated_job for pod in pods)
    super().__init__(counts['ps'], counts['worker'], command, log_dir,
                     isolation='namespace', addressing='tf_config')
    self.pod_env = {}
    for pod in pods:
      spec = jobset_env.task_from_environ(pod.env)
      self.pod_env['%s-%d' % (spec.job_name, spec.task_index)] = pod.env
    self.hosts_file = os.path.join(log_dir, 'hosts')
    with open(self.hosts_file, 'w') as hosts:
      hosts.write('127.0.0.1 localhost\n')
      hosts.writelines('127.0.0.1 %s %s\n' % (pod.fqdn, pod.hostname) for pod in pods)

  def isolate(self):
    self.network = PrivateNetwork.create(hosts_file=self.hosts_file)

  def _environment(self, task):
    env = {k: v for k, v in os.environ.items()
           if k != 'TF_CONFIG' and k not in jobset_env.VARIABLES}
    env.update(self.pod_env[task.name])
    return env


def addressing_flag(pods):
  """The --addressing every pod's command gives (the manifest's, so the run uses it too)."""
  flags = {arg.split('=', 1)[1] for pod in pods for arg in pod.container['command']
           if arg.startswith('--addressing=')}
  assert len(flags) == 1, flags
  return flags.pop()


@pytest.mark.cluster
def _run_pods(pods, command, log_dir):
  """Runs `command` in every pod's environment to the end; -> (the job's status, each
  task's log, each task's exit status)."""
  try:
    with JobSetPods(pods, command, str(log_dir)) as pod_cluster:
      status = pod_cluster.supervise(lambda: False, grace_secs=30)
      return (status, {t.name: log_text(t) for t in pod_cluster.tasks},
              {t.name: t.returncode for t in pod_cluster.tasks})
  except NamespaceUnavailable as error:
    pytest.skip('no private network and mount namespace here: %s' % error)


@pytest.mark.slow
def test_tasks_with_the_manifests_pod_environment_train_to_the_end(digits_dir, tmp_path):
  """The ps manifest scaled to 1 ps + 1 worker: the ps and the chief find each other by
  their pod names. (A non-chief worker's place: the first test, in this process; one
  running from its pod's environment: the all-reduce variant's run below.)"""
  manifest = jobset_pods.the('JobSet', jobset_pods.documents(jobset_pods.JOBSET_MANIFEST))
  pods = [pod for pod in jobset_pods.pods(jobset_pods.scaled(manifest, ps=1, worker=1))
          if pod.replicated_job in jobset_pods.TRAINING_ROLES]
  assert all(pod.container['command'][:2] == ['python', 'train_image_classifier.py']
             for pod in pods)   # The manifest's program; the flags are a small run's.
  train_dir = tmp_path / 'train'
  command = trainer(train_flags(digits_dir, train_dir, max_number_of_steps=8,
                                model_name=SMALL_MODEL)
                    + ['--addressing=%s' % addressing_flag(pods)])
  status, logs, statuses = _run_pods(pods, command, tmp_path / 'logs')
  assert status == 0 and statuses == {'ps-0': 0, 'worker-0': 0}, logs
  for name, text in logs.items():
    assert_clean_log(text, name)
  assert ('worker 0 of 1 (chief) at ucf101-i3d-rgb-10x8-worker-0-0.ucf101-i3d-rgb-10x8:2223;'
          ' cluster of 1 ps + 1 workers from JobSet') in logs['worker-0']
  assert 'All 1 workers left: parameter server 0 exits' in logs['ps-0']
  assert checkpoint_steps(train_dir)[-1] == 8


# The all-reduce variant's own cluster settings, which its pods' run keeps (the others name
# the recipe's data, checkpoint and service, replaced by a small run's).
CLUSTER_FIELDS = ('addressing', 'variable_update', 'num_ps_tasks', 'sync_replicas')


@pytest.mark.cluster
@pytest.mark.slow
def test_the_allreduce_variants_pods_train_without_ps_to_the_end(digits_dir, tmp_path,
                                                                monkeypatch):
  """2 workers and no ps (the variant's JobSet scaled down), each seeing its pod's
  environment and running LeNet with the cluster settings the manifest's command gives
  the trainer (its all-reduce recipe: --variable_update=replicated --num_ps_tasks=0
  --nosync_replicas; --addressing=jobset): every task 0, the chief alone writes."""
  manifest = jobset_pods.the('JobSet', jobset_pods.documents(jobset_pods.ALLREDUCE_MANIFEST))
  pods = [pod for pod in jobset_pods.pods(jobset_pods.scaled(manifest, worker=2))
          if pod.replicated_job in jobset_pods.TRAINING_ROLES]
  monkeypatch.chdir(jobset_pods.ROOT)   # The pod's /app: its flagfile's paths.
  config, _ = config_from_argv(TrainConfig, pods[0].command[2:])
  kept = {name: getattr(config, name) for name in CLUSTER_FIELDS}
  assert kept == {'addressing': 'jobset', 'variable_update': 'replicated', 'num_ps_tasks': 0,
                  'sync_replicas': False}, kept
  train_dir = tmp_path / 'train'
  command = trainer(train_flags(digits_dir, train_dir, max_number_of_steps=8,
                                model_name=SMALL_MODEL, **kept))
  status, logs, statuses = _run_pods(pods, command, tmp_path / 'logs')
  assert status == 0 and statuses == {'worker-0': 0, 'worker-1': 0}, logs
  for name, text in logs.items():
    assert_clean_log(text, name)
    assert 'gradients all-reduced over 1 clone(s) of 2 worker(s)' in text, text[-2000:]
  assert ('worker 0 of 2 (chief) at ucf101-i3d-rgb-10x8-ar-worker-0-0.ucf101-i3d-rgb-10x8-ar'
          ':2222; cluster of 2 workers without ps (all-reduce) from JobSet') in logs['worker-0']
  assert len(glob.glob(str(train_dir / 'events.out.tfevents.*'))) == 1   # The chief's.
  assert checkpoint_steps(train_dir) == [8]


def _hosts_file(pods, path):
  with open(path, 'w') as hosts:
    hosts.write('127.0.0.1 localhost\n')
    hosts.writelines('127.0.0.1 %s %s\n' % (pod.fqdn, pod.hostname) for pod in pods)
  return str(path)


@pytest.mark.cluster
def test_the_manifests_dispatcher_and_a_data_worker_start_and_register(tmp_path):
  """The dispatcher's and data worker 0's commands as the kubelet renders them ($(VAR)
  expanded from the pod's environment), run for real where every pod name is 127.0.0.1:
  the worker registers with the dispatcher under its own pod name."""
  manifest = jobset_pods.the('JobSet', jobset_pods.documents(jobset_pods.JOBSET_MANIFEST))
  pods = jobset_pods.pods(manifest)
  dispatcher, worker = [next(p for p in pods if p.replicated_job == name)
                        for name in ('dispatcher', 'data-worker')]
  commands = {
      'dispatcher': [sys.executable] + [
          '--work_dir=%s' % (tmp_path / 'journal') if arg.startswith('--work_dir=') else arg
          for arg in dispatcher.command[1:]],
      'data_worker': [sys.executable] + worker.command[1:]}
  try:
    network = PrivateNetwork.create(hosts_file=_hosts_file(pods, tmp_path / 'hosts'))
  except NamespaceUnavailable as error:
    pytest.skip('no private network and mount namespace here: %s' % error)
  processes = {}
  with network:
    try:
      for name, argv in commands.items():
        with open(tmp_path / (name + '.log'), 'w') as log:
          processes[name] = subprocess.Popen(network.wrap(argv), cwd=jobset_pods.ROOT,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             preexec_fn=functools.partial(
                                                 leftovers.die_with_parent, os.getpid()))
      read = lambda name: (tmp_path / (name + '.log')).read_text()
      wait_until(lambda: 'Dispatcher: 1 data worker registered' in read('dispatcher') or
                 any(p.poll() is not None for p in processes.values()), 120,
                 'the data worker to register')
    finally:
      for process in processes.values():
        process.send_signal(signal.SIGTERM)
      statuses = {name: process.wait(timeout=60) for name, process in processes.items()}
  assert statuses == {'dispatcher': 0, 'data_worker': 0}, (read('dispatcher'),
                                                            read('data_worker'))
  assert 'Dispatcher: 1 data worker registered' in read('dispatcher')
  assert 'data worker %s 2235, registered with %s:2234' % (READY, dispatcher.fqdn) in read(
      'data_worker')
