"""--addressing: where a task finds its place in a cluster, as a `TaskSpec`.

'flags' reads --ps_hosts/--worker_hosts/--job_name/--task_index; each entry of
ADDRESSINGS reads one environment a scheduler sets (TF_CONFIG, Slurm's srun step in
deployment/cluster/slurm_env.py, a JobSet pod in deployment/cluster/jobset_env.py), its
`find` returning the TaskSpec, or None when that environment is absent; 'auto' takes the
flags or TF_CONFIG (deliberate choices) first, then a scheduler's environment (ambient:
every process of a Slurm job has one). `register_addressing` adds a source, which makes
it a --addressing choice (ADDRESSING_CHOICES). `find_task` is the trainer's one call.
"""

import dataclasses

from deployment.cluster import jobset_env, slurm_env
from deployment.cluster.task_spec import ClusterError, resolve_task, task_from_flags, \
    task_from_tf_config

__all__ = ['Addressing', 'ADDRESSINGS', 'ADDRESSING_CHOICES', 'register_addressing',
           'find_task']


@dataclasses.dataclass(frozen=True)
class Addressing:
  find: object   # (environ mapping, num_ps from --num_ps_tasks) -> TaskSpec or None
  needs: str     # what must be set, for the error when it was asked for and is absent


ADDRESSINGS = {}


def register_addressing(name, find, needs):
  """Adds an environment source `--addressing=name`; refuses a name twice."""
  if name in ADDRESSINGS or name in ('auto', 'flags'):
    raise ValueError('addressing %r is already registered' % name)
  ADDRESSINGS[name] = Addressing(find, needs)


def _slurm(environ, num_ps):
  return slurm_env.task_from_environ(environ, num_ps)


def _jobset(environ, num_ps):  # pylint: disable=unused-argument  (the pod's env gives P)
  return jobset_env.task_from_environ(environ)


register_addressing('tf_config', lambda environ, num_ps: task_from_tf_config(
    environ.get('TF_CONFIG')), 'TF_CONFIG')
register_addressing('slurm', _slurm, 'a task of an srun step of P + W tasks (SLURM_STEP_ID, '
                    'SLURM_PROCID) with --num_ps_tasks=P')
register_addressing('jobset', _jobset, 'a JobSet pod (JOBSET_NAME)')
ADDRESSING_CHOICES = ('auto', 'flags') + tuple(ADDRESSINGS)


def find_task(addressing, host_flags, environ, num_ps=0):
  """The TaskSpec from the source `addressing` names, or None for a single process.

  Args:
    addressing: one of ADDRESSING_CHOICES (--addressing).
    host_flags: (ps_hosts, worker_hosts, job_name, task_index), the legacy flags.
    environ: a mapping like os.environ.
    num_ps: --num_ps_tasks (Slurm's step does not say how many of its tasks are ps).
  """
  if addressing == 'auto':
    task = resolve_task(*host_flags, tf_config=environ.get('TF_CONFIG'))
    for name in ('slurm', 'jobset'):
      task = task or ADDRESSINGS[name].find(environ, num_ps)
    return task
  if addressing == 'flags':
    task = task_from_flags(*host_flags)
    if task is None:
      raise ClusterError('--addressing=flags needs --ps_hosts, --worker_hosts and --job_name')
    return task
  if addressing not in ADDRESSINGS:
    raise ClusterError('--addressing=%s is not known; valid: %s'
                       % (addressing, ', '.join(ADDRESSING_CHOICES)))
  if any(host_flags):
    raise ClusterError('--addressing=%s reads the cluster from the environment; drop '
                       '--ps_hosts/--worker_hosts/--job_name/--task_index' % addressing)
  task = ADDRESSINGS[addressing].find(environ, num_ps)
  if task is None:
    raise ClusterError('--addressing=%s found no cluster: it needs %s'
                       % (addressing, ADDRESSINGS[addressing].needs))
  return task
