"""Checks that need no running job: the cluster's names resolve, its ports are free, a
directory takes files; and the layout of a job not started yet (`PlannedJob`).

Each check takes a `deployment.cluster.task_spec.TaskSpec`-like cluster (ps_hosts, worker_hosts of
'host:port', and `source` for messages) and returns a list of one-line problems, empty when
all is well. `start_server` runs the task's own checks before TensorFlow binds its port
(TensorFlow's own refusal is a gRPC log line and "Could not start gRPC server");
`python -m training.check_cluster` runs them all from the submitting host. A job whose
addresses exist only once it runs (a launch_local job; a Slurm job, from the host that
submits it, which has no SLURM_* variables) is described by `PlannedJob`'s flags instead:
`slurm_step_environ` gives the variables its chief's task will see.

A port is free when it can be bound as TensorFlow binds it: 0.0.0.0:port, with
SO_REUSEADDR as gRPC sets it (a closed connection's TIME_WAIT does not hold the port).
On Kubernetes a pod's DNS name appears a few seconds after the pod starts, so
`wait_for_names` retries resolution instead of refusing at once. No TensorFlow here.
"""

import dataclasses
import os
import socket
import tempfile
import time

from absl import logging

from core.errors import ConfigError, require
from core.params import param

__all__ = ['addresses', 'split_address', 'resolution_problems', 'wait_for_names',
           'is_local', 'port_taken', 'port_problems', 'own_port_problem',
           'writable_dir_problems', 'PlannedJob', 'slurm_step_environ', 'slurm_layout']

RETRY_SECS = 1.0


def split_address(address):
  """'host:port' or '[v6]:port' -> (host, port)."""
  host, _, port = address.rpartition(':')
  return host.strip('[]'), int(port)


def _where(task, job):
  """The flag (or environment) that gave the job's addresses, for messages."""
  return '--%s_hosts' % job if task.source == 'flags' else task.source


def addresses(task):
  """[(job, index, 'host:port', where)] of every task of the cluster, ps first."""
  return [(job, index, address, _where(task, job))
          for job, hosts in (('ps', task.ps_hosts), ('worker', task.worker_hosts))
          for index, address in enumerate(hosts)]


def _resolve(host):
  """The IP addresses of `host` (IPv4 first); raises OSError (socket.gaierror)."""
  infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
  return sorted({info[4][0] for info in infos}, key=lambda ip: (':' in ip, ip))


def _unresolved_line(job, index, address, where, error):
  return ("%s %d's host %s does not resolve (%s): %s; give a name this machine's resolver "
          "knows (DNS, /etc/hosts) or an IP address" % (
              job, index, split_address(address)[0], where, error))


def resolution_problems(task, only=None):
  """A line for each address whose host does not resolve; `only`: the (job, index) pairs
  to look at (default: all)."""
  problems = []
  for job, index, address, where in addresses(task):
    if only is not None and (job, index) not in only:
      continue
    try:
      _resolve(split_address(address)[0])
    except OSError as error:
      problems.append(_unresolved_line(job, index, address, where, error))
  return problems


def wait_for_names(task, timeout_secs, clock=time.monotonic, sleep=time.sleep):
  """Retries `resolution_problems(task)` until none is left or `timeout_secs` (0 = forever)
  have passed, logging once what it waits for; returns the problems left ([] = all
  resolve)."""
  deadline = clock() + timeout_secs if timeout_secs else None
  problems = resolution_problems(task)
  if problems:
    logging.info('Waiting up to %s for %d host name(s) of the cluster to resolve (a pod\'s '
                 'DNS name appears after it starts; --startup_timeout_secs): %s',
                 '%g s' % timeout_secs if timeout_secs else 'forever', len(problems),
                 problems[0])
  while problems and (deadline is None or clock() < deadline):
    sleep(RETRY_SECS if deadline is None else max(0.0, min(RETRY_SECS, deadline - clock())))
    problems = resolution_problems(task)
  return problems


def is_local(ip):
  """Whether `ip` belongs to this machine: loopback, or an address it can bind."""
  if ip.startswith('127.') or ip == '::1':
    return True
  family = socket.AF_INET6 if ':' in ip else socket.AF_INET
  with socket.socket(family, socket.SOCK_STREAM) as probe:
    try:
      probe.bind((ip, 0))
    except OSError:
      return False
  return True


def port_taken(port):
  """The OSError that binding 0.0.0.0:port (as TensorFlow does) raises, or None if free."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(('', port))
    except OSError as error:
      return error
  return None


def _taken_line(job, index, address):
  return ('port %d of %s %d (%s) is already taken on this machine: another job or a '
          'leftover task holds it; pick another port or stop it'
          % (split_address(address)[1], job, index, address))


def _listening(host, port, timeout_secs):
  try:
    with socket.create_connection((host, port), timeout=timeout_secs):
      return True
  except OSError:
    return False


def port_problems(task, connect_timeout_secs=1.0):
  """A line for each address whose port is taken: bound on this machine (for addresses
  of this machine), or answering a TCP connection (other hosts: before launch nothing of
  the job may listen yet). Addresses that do not resolve are left to
  resolution_problems."""
  problems = []
  for job, index, address, _ in addresses(task):
    host, port = split_address(address)
    try:
      ips = _resolve(host)
    except OSError:
      continue
    if any(is_local(ip) for ip in ips):
      if port_taken(port):
        problems.append(_taken_line(job, index, address))
    elif _listening(host, port, connect_timeout_secs):
      problems.append('something already listens on %s (%s %d): before launch no task may '
                      'run there; stop the leftover task or pick another port'
                      % (address, job, index))
  return problems


def own_port_problem(task):
  """The line for this task's own port if it cannot be bound here, else None."""
  if port_taken(split_address(task.address)[1]):
    return _taken_line(task.job_name, task.task_index, task.address)
  return None


def writable_dir_problems(path, flag):
  """[] when `path` is (or can be made) a directory that takes a file, else one line
  naming the flag, the path and the OS's reason."""
  if os.path.exists(path) and not os.path.isdir(path):
    return ['%s=%s cannot be written: it is a file, not a directory; give a directory this '
            'user can write' % (flag, path)]
  try:
    os.makedirs(path, exist_ok=True)
    handle, probe = tempfile.mkstemp(prefix='.preflight-', dir=path)
    os.close(handle)
    os.remove(probe)
  except OSError as error:
    return ['%s=%s cannot be written: %s%s; give a directory this user can write' % (
        flag, path, error.strerror or error,
        ' (%s)' % error.filename if error.filename and error.filename != path else '')]
  return []


@dataclasses.dataclass(frozen=True)
class PlannedJob:
  """The flags `python -m training.check_cluster` adds to the trainer's: the layout of a
  job whose addresses do not exist before it runs (docs/cluster.md, "Check before
  launch"). All unset: the cluster of --ps_hosts/--worker_hosts, TF_CONFIG or
  --addressing, as the trainer reads it."""
  # Planned launch_local job.
  launch_local_workers: int = param(
      0, 'Check a `python -m deployment.launch_local` job of this many workers (its '
      '--num_workers); 0 = not one. Its tasks get their addresses from the launcher.')
  launch_local_ps: int = param(1, 'That job\'s --num_ps.')
  launch_local_data_workers: int = param(0, 'That job\'s --num_data_workers.')
  # Planned Slurm job (from its submitting host).
  slurm_ntasks: int = param(
      0, 'With --addressing=slurm from the submitting host (no SLURM_* variables there): '
      'the job\'s sbatch --ntasks (configs/slurm/train.sbatch: P + W, + 1 + D with '
      '--data_workers=D), P being --num_ps_tasks; 0 = read the srun step\'s environment.')
  slurm_nodes: int = param(0, 'The job\'s sbatch --nodes; 0 = as many as --slurm_nodelist '
                           'names.')
  slurm_nodelist: str = param(
      '', 'The job\'s nodes in Slurm\'s hostlist syntax (sbatch --nodelist, e.g. '
      'node[0-9]), to check they resolve; unset = known only once Slurm allocates them.')
  slurm_distribution: str = param('block', 'The training step\'s task layout: block or '
                                  'cyclic (sbatch --distribution).')
  slurm_data_workers: int = param(0, 'train.sbatch --data_workers=D: 1 + D of the tasks run '
                                  'a tf.data service; 0 = none.')


def _even_split(tasks, nodes):
  """Slurm's default layout of `tasks` over `nodes`: even, the first nodes one more
  ('2(x2),1(x8)' for 12 over 10)."""
  base, extra = divmod(tasks, nodes)
  counts = [(base + 1, extra), (base, nodes - extra)]
  return ','.join('%d(x%d)' % (count, times) if times > 1 else str(count)
                  for count, times in counts if times and count)


def _planned_nodes(plan):
  """The node names of the plan (placeholders without --slurm_nodelist) and whether they
  are the real ones."""
  from deployment.cluster import slurm_env  # pylint: disable=import-outside-toplevel  (TF)
  try:
    names = (slurm_env.expand_hostlist(plan.slurm_nodelist, '--slurm_nodelist')
             if plan.slurm_nodelist else None)
  except ValueError as error:   # task_spec.ClusterError
    raise ConfigError(str(error)) from None
  count = plan.slurm_nodes or len(names or ())
  require(count >= 1, '--slurm_ntasks=%d needs --slurm_nodes=N (sbatch --nodes) or '
          '--slurm_nodelist' % plan.slurm_ntasks)
  require(names is None or len(names) == count, '--slurm_nodes=%d but --slurm_nodelist=%s '
          'names %d nodes' % (count, plan.slurm_nodelist, len(names or ())))
  require(count <= plan.slurm_ntasks, '--slurm_nodes=%d is more than --slurm_ntasks=%d: '
          'Slurm runs at least one task per node' % (count, plan.slurm_ntasks))
  return names or ['node%d' % i for i in range(count)], names is not None


def slurm_layout(plan, num_ps):
  """(training tasks, node names, whether those names are real, tasks per node) of the
  training step configs/slurm/train.sbatch runs in the job `plan` describes. Raises
  ConfigError naming the flag."""
  require(plan.slurm_data_workers >= 0, '--slurm_data_workers=%d must be >= 0 (0: no '
          'tf.data service)' % plan.slurm_data_workers)
  require(plan.slurm_distribution in ('block', 'cyclic'), '--slurm_distribution=%s is not '
          'known; valid: block, cyclic' % plan.slurm_distribution)
  service = plan.slurm_data_workers + 1 if plan.slurm_data_workers else 0
  tasks = plan.slurm_ntasks - service
  require(0 <= num_ps < tasks, '--num_ps_tasks=%d with --slurm_ntasks=%d%s: train.sbatch P '
          'runs P parameter servers and at least one worker; valid: 1..%d, or 0 for workers '
          'only (all-reduce)' % (num_ps, plan.slurm_ntasks, ' (%d of them the tf.data '
                                 'service)' % service if service else '', max(1, tasks - 1)))
  names, real = _planned_nodes(plan)
  used = min(len(names), tasks)   # the step's tasks, over the job's nodes
  return tasks, names[:used], real, _even_split(tasks, used)


def slurm_step_environ(plan, num_ps):
  """The SLURM_* variables (and train.sbatch's) the chief's task will see in the training
  step of the job `plan` describes: what `--addressing=slurm` reads inside the job. The
  job id is not known yet (0: the ports of its slot are not the real ones)."""
  tasks, names, _, per_node = slurm_layout(plan, num_ps)
  return {'SLURM_STEP_ID': '0', 'SLURM_PROCID': str(num_ps), 'SLURM_JOB_ID': '0',
          'SLURM_STEP_NUM_TASKS': str(tasks), 'SLURM_STEP_NODELIST': ','.join(names),
          'SLURM_STEP_TASKS_PER_NODE': per_node,
          'SLURM_DISTRIBUTION': plan.slurm_distribution,
          'SLIMDEPLOY_JOB_TASKS': str(plan.slurm_ntasks), 'SLIMDEPLOY_NUM_PS': str(num_ps)}
