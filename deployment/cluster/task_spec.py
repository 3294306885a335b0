"""Which task of a parameter-server cluster a process is: `TaskSpec`, read and checked.

A cluster has two jobs: `ps` (parameter servers, holding the variables) and `worker`
(training replicas; worker 0 is the chief, the only task that writes checkpoints and
summaries); a cluster of workers only all-reduces (deployment/cluster/peers.py). A task
learns its place from the legacy flags

    --ps_hosts=h1:2222 --worker_hosts=h2:2222,h3:2222 --job_name=worker --task_index=1

or from the TF_CONFIG environment variable that Kubeflow's TFJob operator and most
schedulers set. TF_CONFIG's separate `chief` (or `master`) task is folded in as worker 0
and the workers shift up by one, so every task computes the same cluster; an `evaluator`
entry is dropped (it does not train). `resolve_task` returns a `TaskSpec`, or None when
neither describes a cluster (a single process); a scheduler's environment
(`slurm_env`, `jobset_env`) builds one too and checks it with `check_task`. Which source
a trainer reads is its --addressing (deployment/cluster/addressing.py).

Mistakes raise `ClusterError` (a ValueError) with one line naming the flag (or TF_CONFIG
key), the bad value and what would be accepted.
"""

import dataclasses
import json
import re

from tf_compat import tf

__all__ = ['ClusterError', 'NamesUnresolved', 'TaskSpec', 'JOBS', 'check_task',
           'resolve_task', 'task_from_flags', 'task_from_tf_config']

JOBS = ('ps', 'worker')
_HOST_PORT = re.compile(r'^[^\s:/,]+:(\d+)$|^\[[0-9a-fA-F:.]+\]:(\d+)$')


class ClusterError(ValueError):
  """A cluster description that cannot work; the message is one line."""


class NamesUnresolved(ClusterError):
  """Host names of the cluster still unresolved after the wait: a peer pod not yet
  scheduled, or a wrong name. Retryable, unlike a mistake in the description."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """One task of a ps/worker cluster. Worker 0 is the chief."""
  ps_hosts: tuple
  worker_hosts: tuple
  job_name: str
  task_index: int
  source: str = 'flags'   # 'flags', 'TF_CONFIG', 'Slurm job N', for messages

  num_ps = property(lambda self: len(self.ps_hosts))
  num_workers = property(lambda self: len(self.worker_hosts))
  is_ps = property(lambda self: self.job_name == 'ps')
  is_chief = property(lambda self: self.job_name == 'worker' and self.task_index == 0)

  @property
  def address(self):
    hosts = self.ps_hosts if self.is_ps else self.worker_hosts
    return hosts[self.task_index]

  def cluster_spec(self):
    jobs = (('ps', self.ps_hosts), ('worker', self.worker_hosts))
    return tf.train.ClusterSpec({job: list(hosts) for job, hosts in jobs if hosts})

  def describe(self):
    """'worker 1 of 2 at h:p; cluster of 1 ps + 2 workers from flags', for start-up lines
    and error messages ('... cluster of 2 workers without ps (all-reduce) ...')."""
    count = self.num_ps if self.is_ps else self.num_workers
    role = ' (chief)' if self.is_chief else ''
    size = ('%d ps + %d workers' % (self.num_ps, self.num_workers) if self.num_ps else
            '%d workers without ps (all-reduce)' % self.num_workers)
    return '%s %d of %d%s at %s; cluster of %s from %s' % (
        self.job_name, self.task_index, count, role, self.address, size, self.source)

  def name_of(self, device):
    """'/job:ps/replica:0/task:1/...' -> '/job:ps/task:1 (h:p)'; None if not a task."""
    match = re.search(r'/job:(ps|worker)(?:/replica:\d+)?/task:(\d+)', device or '')
    if not match:
      return None
    hosts = self.ps_hosts if match.group(1) == 'ps' else self.worker_hosts
    index = int(match.group(2))
    where = ' (%s)' % hosts[index] if index < len(hosts) else ''
    return '/job:%s/task:%d%s' % (match.group(1), index, where)


def _check_hosts(name, hosts):
  for host in hosts:
    if not _HOST_PORT.match(host):
      raise ClusterError('%s: %r is not host:port (e.g. 10.0.0.1:2222)' % (name, host))
    port = int(host.rsplit(':', 1)[1])
    if not 0 < port < 65536:
      raise ClusterError('%s: %r has port %d, not in 1..65535' % (name, host, port))
  duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
  if duplicates:
    raise ClusterError('%s lists %s more than once' % (name, ', '.join(duplicates)))


def check_task(task, ps_name, worker_name, job_flag, index_flag):
  """`task`, once its hosts and role make a cluster; else ClusterError, one line naming
  the flag (or variable) `ps_name`, `worker_name`, `job_flag` or `index_flag` and its value."""
  if task.job_name not in JOBS:
    raise ClusterError('%s=%s is not a training job; valid: %s'
                       % (job_flag, task.job_name, ', '.join(JOBS)))
  if not task.worker_hosts:
    raise ClusterError('%s is empty: a cluster needs at least one worker (the chief)'
                       % worker_name)
  if task.is_ps and not task.ps_hosts:
    raise ClusterError('%s=ps but %s is empty: a cluster without parameter servers has '
                       'workers only' % (job_flag, ps_name))
  _check_hosts(ps_name, list(task.ps_hosts))
  _check_hosts(worker_name, list(task.worker_hosts))
  overlap = sorted(set(task.ps_hosts) & set(task.worker_hosts))
  if overlap:
    raise ClusterError('%s and %s both list %s: every task needs its own host:port'
                       % (ps_name, worker_name, ', '.join(overlap)))
  count = task.num_ps if task.is_ps else task.num_workers
  if not 0 <= task.task_index < count:
    raise ClusterError('%s=%d is out of range: %s lists %d %s task(s), valid: 0..%d'
                       % (index_flag, task.task_index, ps_name if task.is_ps else
                          worker_name, count, task.job_name, count - 1))
  return task


def task_from_flags(ps_hosts, worker_hosts, job_name, task_index):
  """The task named by the legacy flags, or None when none of them is set.

  Args:
    ps_hosts, worker_hosts: sequences of 'host:port' (absl list flags).
    job_name: 'ps' or 'worker' (None or '' when unset).
    task_index: index within the job.
  """
  ps_hosts, worker_hosts = tuple(ps_hosts or ()), tuple(worker_hosts or ())
  if not (ps_hosts or worker_hosts or job_name):
    return None
  if not job_name:
    raise ClusterError('--job_name is required with --ps_hosts/--worker_hosts; valid: %s'
                       % ', '.join(JOBS))
  task = TaskSpec(ps_hosts, worker_hosts, job_name, int(task_index), 'flags')
  return check_task(task, '--ps_hosts', '--worker_hosts', '--job_name', '--task_index')


def _tf_config_hosts(cluster, key):
  hosts = cluster.get(key, [])
  if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
    raise ClusterError('TF_CONFIG cluster.%s must be a list of "host:port" strings, got %r'
                       % (key, hosts))
  return hosts


def _parse_tf_config(text):
  try:
    value = json.loads(text)
  except ValueError as error:
    raise ClusterError('TF_CONFIG is not valid JSON (%s): %.80s' % (error, text)) from None
  if not isinstance(value, dict) or not isinstance(value.get('cluster'), dict):
    raise ClusterError('TF_CONFIG has no "cluster" object: %.80s' % text)
  task = value.get('task')
  if not isinstance(task, dict) or 'type' not in task:
    raise ClusterError('TF_CONFIG has no "task": {"type": ..., "index": ...}: %.80s' % text)
  return value['cluster'], task


def task_from_tf_config(text):
  """The task described by a TF_CONFIG JSON string, or None for an empty one."""
  if not text or not text.strip():
    return None
  cluster, task = _parse_tf_config(text)
  unknown = sorted(set(cluster) - {'chief', 'master', 'worker', 'ps', 'evaluator'})
  if unknown:
    raise ClusterError('TF_CONFIG cluster has unknown job(s) %s; valid: chief (or master), '
                       'worker, ps, evaluator' % ', '.join(unknown))
  chiefs = _tf_config_hosts(cluster, 'chief') + _tf_config_hosts(cluster, 'master')
  if len(chiefs) > 1:
    raise ClusterError('TF_CONFIG lists %d chief/master tasks (%s); at most one'
                       % (len(chiefs), ', '.join(chiefs)))
  workers = tuple(chiefs + _tf_config_hosts(cluster, 'worker'))
  kind, index = task.get('type'), task.get('index', 0)
  if not isinstance(index, int) or isinstance(index, bool):
    raise ClusterError('TF_CONFIG task.index=%r must be an integer' % (index,))
  if kind == 'evaluator':
    raise ClusterError('TF_CONFIG task.type=evaluator does not train: run eval.py with '
                       '--checkpoint_path on the chief\'s train_dir instead')
  if kind in ('chief', 'master'):
    job_name, task_index = 'worker', index
  elif kind == 'worker':
    job_name, task_index = 'worker', index + len(chiefs)
  elif kind == 'ps':
    job_name, task_index = 'ps', index
  else:
    raise ClusterError('TF_CONFIG task.type=%r is not known; valid: chief, master, worker, '
                       'ps' % (kind,))
  spec = TaskSpec(tuple(_tf_config_hosts(cluster, 'ps')), workers, job_name, task_index,
                  'TF_CONFIG')
  return check_task(spec, 'TF_CONFIG cluster.ps', 'TF_CONFIG cluster.chief+worker',
                     'TF_CONFIG task.type', 'TF_CONFIG task.index')


def resolve_task(ps_hosts=(), worker_hosts=(), job_name=None, task_index=0, tf_config=None):
  """The TaskSpec from the flags or from TF_CONFIG (not both), or None for no cluster."""
  if (ps_hosts or worker_hosts or job_name) and tf_config and tf_config.strip():
    raise ClusterError('both --ps_hosts/--worker_hosts/--job_name and TF_CONFIG describe a '
                       'cluster; use one (unset TF_CONFIG or drop the flags)')
  from_flags = task_from_flags(ps_hosts, worker_hosts, job_name, task_index)
  from_env = task_from_tf_config(tf_config)
  if not from_flags and task_index:
    if not from_env:
      raise ClusterError('--task_index=%d needs --ps_hosts, --worker_hosts and --job_name '
                         '(or TF_CONFIG)' % task_index)
    raise ClusterError('--task_index=%d conflicts with TF_CONFIG, which gives the task '
                       'index; drop --task_index' % task_index)
  return from_flags or from_env
