"""The layout of a cluster on this host: its tasks, their ports and logs, and what each runs.

`ClusterLayout(num_ps, num_workers, command, log_dir)` names every task (num_ps 0:
workers only, which all-reduce; no ps flag or TF_CONFIG key then), picks each a free port
on 127.0.0.1 and a log, `<log_dir>/<job>-<index>.log`, and says what it runs: the same
`command` (any program that joins a TensorFlow cluster) plus its place in the cluster,
`--ps_hosts --worker_hosts --job_name --task_index` appended, or TF_CONFIG in its
environment (`addressing='tf_config'`), TensorFlow's two conventions, which
deployment/cluster/task_spec.py reads. With `num_data_workers` N > 0 a tf.data service
comes first: a dispatcher and N data workers, each `python -m datasets.data_service` (a
command: deployment imports no datasets), and the training tasks get
`--data_service_address`. Starting the tasks is deployment/cluster/local_cluster.py.
"""

import dataclasses
import json
import os
import shlex
import subprocess
import sys

import portpicker

from core.params import ConfigError

__all__ = ['ClusterLayout', 'Task', 'check_layout', 'ADDRESSING_FLAGS', 'SERVICE_FLAG',
           'SERVICE_JOBS', 'ADDRESSINGS']

# TensorFlow's cluster flags (task_spec reads them): the launcher appends them to the
# command, so the command must not carry them itself.
ADDRESSING_FLAGS = ('ps_hosts', 'worker_hosts', 'job_name', 'task_index')
SERVICE_FLAG = 'data_service_address'  # Given to the training tasks with a data service.
SERVICE_JOBS = ('dispatcher', 'data_worker')
ADDRESSINGS = ('flags', 'tf_config')
# The repository root, three levels above deployment/cluster/local_layout.py, on the
# service tasks' path for `-m datasets...`.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Task:
  """One task's place (job, index, port, log) and, once started, its process."""
  job: str
  index: int
  port: int
  log_path: str
  process: subprocess.Popen = None
  starts: int = 0

  name = property(lambda self: '%s-%d' % (self.job, self.index))

  @property
  def returncode(self):
    """Exit status (128 + signal number when killed), None while running or unstarted."""
    code = None if self.process is None else self.process.poll()
    return 128 - code if code is not None and code < 0 else code


def check_layout(num_ps, num_workers, command, log_dir, addressing, num_data_workers):
  """ConfigError (one line naming the flag) for a layout no cluster can run with."""
  if num_ps < 0 or num_workers < 1:
    raise ConfigError('--num_ps=%d, --num_workers=%d: --num_ps must be >= 0 (0: workers '
                      'only, all-reduce) and --num_workers >= 1' % (num_ps, num_workers))
  if num_data_workers < 0:
    raise ConfigError('--num_data_workers=%d must be >= 0 (0: no tf.data service)'
                      % num_data_workers)
  if addressing not in ADDRESSINGS:
    raise ConfigError('--addressing=%s is not known; valid: %s'
                      % (addressing, ', '.join(ADDRESSINGS)))
  if not log_dir:
    raise ConfigError('--task_log_dir is required: the directory of the tasks\' logs')
  if not command:
    raise ConfigError('no command to run: give the command every task runs after --, '
                      'e.g. -- python my_trainer.py --flag=value')
  flags = ADDRESSING_FLAGS + ((SERVICE_FLAG,) if num_data_workers else ())
  owned = [a for a in command[1:] if a.startswith('-') and a.lstrip('-').split('=')[0] in flags]
  if owned:
    raise ConfigError('the launcher sets the cluster flags; remove %s from the command'
                      % ', '.join(owned))


class ClusterLayout:
  """The tasks of a local cluster and what each runs (module doc); checked when made.

  Raises:
    ConfigError: a layout no cluster can run with (the message names the flag).
  """

  def __init__(self, num_ps, num_workers, command, log_dir, addressing='flags',
               num_data_workers=0):
    check_layout(num_ps, num_workers, command, log_dir, addressing, num_data_workers)
    self.command_line = list(command)
    self.log_dir = log_dir
    self.addressing = addressing
    service = ((('dispatcher', 1), ('data_worker', num_data_workers))
               if num_data_workers else ())
    # The data service first: the trainers find it up when they build their input.
    self.tasks = [Task(job, i, portpicker.pick_unused_port(),
                       os.path.join(log_dir, '%s-%d.log' % (job, i)))
                  for job, count in service + (('ps', num_ps), ('worker', num_workers))
                  for i in range(count)]

  def task(self, name):
    return next(t for t in self.tasks if t.name == name)

  @property
  def chief(self):
    return self.task('worker-0')

  def hosts(self, job):
    return ['127.0.0.1:%d' % t.port for t in self.tasks if t.job == job]

  @property
  def service_address(self):
    """host:port of the tf.data service's dispatcher, or None without one."""
    return next(iter(self.hosts('dispatcher')), None)

  def training_tasks(self):
    return [t for t in self.tasks if t.job not in SERVICE_JOBS]

  def describe(self, isolation_note):
    """The start-up line: tasks, ports, `isolation_note`, what each runs, the logs."""
    ports = '; '.join('%s %s' % (job, ','.join(h.split(':')[1] for h in self.hosts(job)))
                      for job in ('ps', 'worker') + SERVICE_JOBS if self.hosts(job))
    addressing = ('+ %s--worker_hosts --job_name --task_index' % (
        '--ps_hosts ' if self.hosts('ps') else '') if self.addressing == 'flags' else
                  'with TF_CONFIG')
    if self.service_address:
      addressing += ' --%s=%s (a tf.data service dispatcher and %d data workers)' % (
          SERVICE_FLAG, self.service_address, len(self.hosts('data_worker')))
    size = ('%d ps + %d workers' % (len(self.hosts('ps')), len(self.hosts('worker')))
            if self.hosts('ps') else '%d workers without ps (all-reduce)'
            % len(self.hosts('worker')))
    return ('launch_local: %s on 127.0.0.1 (ports: %s), %s; each runs %s %s; logs: %s' % (
        size, ports, isolation_note, shlex.join(self.command_line), addressing,
        os.path.join(self.log_dir, '<job>-<index>.log')))

  def argv(self, task):
    """The argv of `task`: the command, plus its cluster flags unless TF_CONFIG (and the
    data service's address); a service task's own command."""
    if task.job in SERVICE_JOBS:
      return self._service_argv(task)
    argv = list(self.command_line)
    if self.service_address:
      argv.append('--%s=%s' % (SERVICE_FLAG, self.service_address))
    if self.addressing == 'flags':
      argv += ['--ps_hosts=' + ','.join(self.hosts('ps'))] if self.hosts('ps') else []
      argv += ['--worker_hosts=' + ','.join(self.hosts('worker')),
               '--job_name=' + task.job, '--task_index=%d' % task.index]
    return argv

  def _service_argv(self, task):
    """`python -m datasets.data_service` for a dispatcher or data worker task."""
    argv = [sys.executable, '-m', 'datasets.data_service', '--port=%d' % task.port]
    if task.job == 'dispatcher':
      return argv + ['--role=dispatcher',
                     '--work_dir=' + os.path.join(os.path.abspath(self.log_dir), 'data_service')]
    return argv + ['--role=worker', '--dispatcher_address=' + self.service_address,
                   '--worker_address=127.0.0.1:%d' % task.port]

  def environment(self, task, base):
    """`task`'s environment: `base` with the task's TF_CONFIG (tf_config addressing;
    worker 0 is TF_CONFIG's chief), or the repository on a service task's PYTHONPATH."""
    env = dict(base)
    if task.job in SERVICE_JOBS:
      env['PYTHONPATH'] = os.pathsep.join(filter(None, [_ROOT, env.get('PYTHONPATH')]))
    elif self.addressing == 'tf_config':
      workers = self.hosts('worker')
      cluster = {'chief': workers[:1], 'worker': workers[1:]}
      if self.hosts('ps'):
        cluster['ps'] = self.hosts('ps')
      kind, index = ((task.job, task.index) if task.job == 'ps' else
                     ('chief', 0) if task.index == 0 else ('worker', task.index - 1))
      env['TF_CONFIG'] = json.dumps({'cluster': cluster,
                                     'task': {'type': kind, 'index': index}})
    return env
