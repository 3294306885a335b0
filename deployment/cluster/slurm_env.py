"""A parameter-server cluster read from a Slurm job step's environment (`--addressing=slurm`).

One `srun` step runs P + W tasks (configs/slurm/train.sbatch): tasks 0..P-1 are the
parameter servers, tasks P.. the workers (task P is the chief); P is --num_ps_tasks, or
SLIMDEPLOY_NUM_PS for callers that pass only the environment; P = 0: every task is a
worker (all-reduce without ps, deployment/cluster/peers.py). Every task rebuilds the
same cluster from what srun sets: the step's nodes (SLURM_STEP_NODELIST, hostlist syntax
`node[01-03,07],gpu5`), tasks per node (SLURM_STEP_TASKS_PER_NODE, `2(x3),1`) and the task
distribution (block or cyclic), checked against the task ids Slurm put on this node
(SLURM_GTIDS). A second step may run a tf.data service (`service_from_environ`: task 0 the
dispatcher, the rest data workers). A task's port is the i-th port Slurm reserved for its
step when it did (`srun --resv-ports`, SLURM_STEP_RESV_PORTS: never shared with another
step), else PORT_BASE + (SLURM_JOB_ID mod JOB_SLOTS) x SLOT_PORTS + i, i = its local id on
the node, counted from the slot's bottom for training and from its top for the service.
Mistakes raise cluster.ClusterError with one line naming the variable and its value.
"""

import collections
import re

from deployment.cluster.task_spec import ClusterError, TaskSpec

__all__ = ['task_from_environ', 'service_from_environ', 'ServiceTask', 'in_step',
           'expand_hostlist', 'expand_tasks_per_node', 'task_nodes', 'step_ports',
           'PORT_BASE', 'JOB_SLOTS', 'SLOT_PORTS', 'JOB_TASKS']

# Without reserved ports: 2500 slots of 16 ports, 20000..59999 (the range to firewall).
# Two jobs sharing a node collide only if their job ids are equal modulo 2500.
PORT_BASE, JOB_SLOTS, SLOT_PORTS = 20000, 2500, 16
# The batch script's count of every task of the job's steps (training and data service):
# what the two steps together may put on one node.
JOB_TASKS = 'SLIMDEPLOY_JOB_TASKS'
_RANGE = re.compile(r'^(\d+)(?:-(\d+))?$')
_REPEAT = re.compile(r'^(\d+)(?:\(x(\d+)\))?$')


def in_step(environ):
  """True inside a task of an `srun` step (not the batch script, which has no step id)."""
  return bool(environ.get('SLURM_STEP_ID', environ.get('SLURM_STEPID'))) and \
      'SLURM_PROCID' in environ


def _split_top_level(text):
  """'a[1-2,4],b' -> ['a[1-2,4]', 'b']: commas outside brackets separate names."""
  parts, depth, start = [], 0, 0
  for i, char in enumerate(text):
    depth += {'[': 1, ']': -1}.get(char, 0)
    if depth not in (0, 1):
      raise ValueError('unbalanced brackets')
    if char == ',' and depth == 0:
      parts.append(text[start:i])
      start = i + 1
  if depth:
    raise ValueError('unbalanced brackets')
  return parts + [text[start:]]


def _expand_range(text):
  """'01-03' -> ['01', '02', '03'] (zero padding kept), '7' -> ['7']."""
  match = _RANGE.match(text)
  if not match:
    raise ValueError('%r is not N or N-M' % text)
  low, high = match.group(1), match.group(2) or match.group(1)
  if int(high) < int(low):
    raise ValueError('%r goes down' % text)
  width = len(low) if low.startswith('0') else 0
  return [str(n).zfill(width) for n in range(int(low), int(high) + 1)]


def _expand_name(name):
  """'rack[1-2]-n[01,03]' -> every combination, in Slurm's order (last bracket fastest)."""
  match = re.match(r'^([^\[\]]*)\[([^\[\]]*)\](.*)$', name)
  if not match:
    if ']' in name:
      raise ValueError('stray bracket in %r' % name)
    return [name]
  prefix, ranges, rest = match.groups()
  values = [v for part in ranges.split(',') for v in _expand_range(part)]
  return [prefix + value + tail for value in values for tail in _expand_name(rest)]


def expand_hostlist(text, variable='SLURM_STEP_NODELIST'):
  """Slurm's hostlist syntax -> node names, as `scontrol show hostnames` prints them."""
  try:
    hosts = [host for part in _split_top_level(text.strip()) for host in _expand_name(part)]
    if not all(hosts):
      raise ValueError('an empty name')
    return hosts
  except ValueError as error:
    raise ClusterError('%s=%r is not a Slurm host list like node[01-03,07],gpu5 (%s)'
                       % (variable, text, error)) from None


def expand_tasks_per_node(text, variable='SLURM_STEP_TASKS_PER_NODE'):
  """'2(x3),1' -> [2, 2, 2, 1]."""
  counts = []
  for part in text.strip().split(','):
    match = _REPEAT.match(part)
    if not match:
      raise ClusterError('%s=%r is not a task count list like 2(x3),1' % (variable, text))
    counts += [int(match.group(1))] * int(match.group(2) or 1)
  return counts


def task_nodes(counts, distribution):
  """The node index of every task id: block (consecutive ids) or cyclic (round robin)."""
  if distribution == 'block':
    return [node for node, count in enumerate(counts) for _ in range(count)]
  left, nodes = list(counts), []
  while any(left):
    for node, count in enumerate(left):
      if count:
        nodes.append(node)
        left[node] -= 1
  return nodes


def _ports(text):
  """'21000-21002,21007' -> [21000, 21001, 21002, 21007]."""
  try:
    return [int(p) for part in text.split(',') for p in _expand_range(part)]
  except ValueError:
    raise ClusterError('SLURM_STEP_RESV_PORTS=%r is not a port list like 21000-21003'
                       % text) from None


def step_ports(environ, tasks_on_node, from_top=False, sharing=None):
  """The ports of a node's tasks, in local-id order (the same on every node).

  Without reserved ports they come from the job's slot of SLOT_PORTS, the training step's
  from the bottom and the data service step's (`from_top`) from the top, so the two never
  meet while at most SLOT_PORTS tasks of the job (`sharing`, default `tasks_on_node`) can
  share a node."""
  if environ.get('SLURM_STEP_RESV_PORTS'):
    ports = _ports(environ['SLURM_STEP_RESV_PORTS'])
    if len(ports) < tasks_on_node:
      raise ClusterError('SLURM_STEP_RESV_PORTS=%s holds %d ports for %d tasks on a node: '
                         'srun --resv-ports=%d' % (environ['SLURM_STEP_RESV_PORTS'],
                                                   len(ports), tasks_on_node, tasks_on_node))
    return ports[:tasks_on_node]
  sharing = max(sharing or 0, tasks_on_node)
  if sharing > SLOT_PORTS:
    raise ClusterError('up to %d tasks of Slurm job %s (its training and data service steps) '
                       'may share a node, more than the %d ports of a job\'s slot: run '
                       'fewer tasks, or let srun reserve ports (MpiParams=ports in '
                       'slurm.conf)' % (sharing, environ.get('SLURM_JOB_ID', '?'), SLOT_PORTS))
  slot = PORT_BASE + _int(environ, 'SLURM_JOB_ID') % JOB_SLOTS * SLOT_PORTS
  if from_top:
    return [slot + SLOT_PORTS - 1 - i for i in range(tasks_on_node)]
  return [slot + i for i in range(tasks_on_node)]


def _most_on_a_node(environ, nodes):
  """The most tasks of the job that may share one of this step's nodes: the step's own
  there and every task of the job's other step (JOB_TASKS minus this step's), which srun
  may place anywhere (the script starts it with --overlap)."""
  text = environ.get(JOB_TASKS, '').strip()
  if text and not text.isdigit():
    raise ClusterError('%s=%r: expected the number of tasks of the job' % (JOB_TASKS, text))
  others = max(0, int(text or 0) - len(nodes))
  return max(nodes.count(node) for node in set(nodes)) + others


def _int(environ, name):
  value = environ.get(name)
  if value is None or not value.strip().isdigit():
    raise ClusterError('%s=%r: expected a non-negative integer from srun' % (name, value))
  return int(value)


def _layout(environ):
  """(node names, node index of every task id, distribution) of the step."""
  nodelist = 'SLURM_STEP_NODELIST' if 'SLURM_STEP_NODELIST' in environ else \
      'SLURM_JOB_NODELIST'
  per_node = 'SLURM_STEP_TASKS_PER_NODE' if 'SLURM_STEP_TASKS_PER_NODE' in environ else \
      'SLURM_TASKS_PER_NODE'
  hosts = expand_hostlist(environ.get(nodelist, ''), nodelist)
  counts = expand_tasks_per_node(environ.get(per_node, ''), per_node)
  if len(counts) != len(hosts):
    raise ClusterError('%s=%s gives %d nodes but %s=%s gives counts for %d'
                       % (nodelist, environ[nodelist], len(hosts), per_node,
                          environ[per_node], len(counts)))
  distribution = re.split(r'[:,]', environ.get('SLURM_DISTRIBUTION') or 'block')[0]
  if distribution not in ('block', 'cyclic'):
    raise ClusterError('SLURM_DISTRIBUTION=%s: the cluster can be read only from block (the '
                       'default) or cyclic task layouts; srun --distribution=block'
                       % environ['SLURM_DISTRIBUTION'])
  return hosts, task_nodes(counts, distribution), distribution


def _check_own_node(environ, nodes, procid, distribution):
  """The task ids Slurm put on this node must be those the layout puts there."""
  gtids = environ.get('SLURM_GTIDS')
  if not gtids:
    return
  expected = [t for t, node in enumerate(nodes) if node == nodes[procid]]
  if [int(t) for t in gtids.split(',')] != expected:
    raise ClusterError('SLURM_GTIDS=%s: this node runs other tasks than a %s layout of the '
                       'step puts there (%s); srun --distribution=block'
                       % (gtids, distribution, ','.join(map(str, expected))))


def _step_addresses(environ, procid, from_top):
  """host:port of every task of the step, in task-id order, from its layout."""
  ntasks_name = 'SLURM_STEP_NUM_TASKS' if 'SLURM_STEP_NUM_TASKS' in environ else 'SLURM_NTASKS'
  ntasks = _int(environ, ntasks_name)
  hosts, nodes, distribution = _layout(environ)
  if len(nodes) != ntasks or procid >= ntasks:
    raise ClusterError('%s=%d and SLURM_PROCID=%d disagree with the step layout of %d tasks'
                       % (ntasks_name, ntasks, procid, len(nodes)))
  _check_own_node(environ, nodes, procid, distribution)
  ports = step_ports(environ, max(nodes.count(node) for node in set(nodes)), from_top,
                     _most_on_a_node(environ, nodes))
  # A task's local id: how many lower task ids share its node (what Slurm numbers it).
  return ['%s:%d' % (hosts[node], ports[nodes[:task].count(node)])
          for task, node in enumerate(nodes)]


def task_from_environ(environ, num_ps=None):
  """This task of the step's cluster; None outside an srun step or in a one-task step.

  Args:
    environ: a mapping like os.environ, holding srun's SLURM_* variables.
    num_ps: P, the number of parameter servers (--num_ps_tasks): tasks 0..P-1, 0 for
      workers only; None = SLIMDEPLOY_NUM_PS from `environ` (configs/slurm/train.sbatch
      sets both).
  """
  if not in_step(environ):
    return None
  if num_ps is None:
    text = environ.get('SLIMDEPLOY_NUM_PS', '0').strip()
    if not text.isdigit():
      raise ClusterError('SLIMDEPLOY_NUM_PS=%r: expected the number of parameter servers'
                         % text)
    num_ps = int(text)
  ntasks_name = 'SLURM_STEP_NUM_TASKS' if 'SLURM_STEP_NUM_TASKS' in environ else 'SLURM_NTASKS'
  ntasks, procid = _int(environ, ntasks_name), _int(environ, 'SLURM_PROCID')
  if ntasks == 1 and not num_ps:
    return None   # `srun python train_image_classifier.py`: one process, no cluster.
  if not 0 <= num_ps < ntasks:
    raise ClusterError('--num_ps_tasks=%d with a Slurm step of %s=%d tasks: tasks 0..P-1 are '
                       'the parameter servers, the rest workers; valid: 0..%d (0: every '
                       'task a worker)' % (num_ps, ntasks_name, ntasks, ntasks - 1))
  addresses = _step_addresses(environ, procid, from_top=False)
  job_name, index = ('ps', procid) if procid < num_ps else ('worker', procid - num_ps)
  return TaskSpec(tuple(addresses[:num_ps]), tuple(addresses[num_ps:]), job_name, index,
                  'Slurm job %s' % environ.get('SLURM_JOB_ID', '?'))


# role: 'dispatcher' or 'worker' (datasets.data_service's --role); address: host:port it
# listens on and advertises; dispatcher_address: task 0's.
ServiceTask = collections.namedtuple('ServiceTask', 'role port address dispatcher_address')


def service_from_environ(environ):
  """This task of a tf.data service step (task 0 the dispatcher, the others data workers),
  its port from the top of the job's slot; ClusterError outside an srun step."""
  if not in_step(environ):
    raise ClusterError('--addressing=slurm needs an srun step: SLURM_STEP_ID=%r, '
                       'SLURM_PROCID=%r' % (environ.get('SLURM_STEP_ID'),
                                            environ.get('SLURM_PROCID')))
  procid = _int(environ, 'SLURM_PROCID')
  addresses = _step_addresses(environ, procid, from_top=True)
  return ServiceTask('worker' if procid else 'dispatcher',
                     int(addresses[procid].rsplit(':', 1)[1]), addresses[procid],
                     addresses[0])
