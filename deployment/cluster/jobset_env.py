"""A Kubernetes JobSet pod's place in its ps/worker cluster, read from its environment.

A JobSet (jobset.x-k8s.io/v1alpha2) runs, for each replica of each replicated job, one
Indexed Job; with `network.enableDNSHostnames` every pod answers at
`<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>` (the subdomain defaults to the
JobSet's name). JobSet passes a pod its place only as annotations, which the manifest
(configs/k8s/) hands to the container through the downward API, beside two values of its
own; `docs/cluster.md` ("Kubernetes JobSet") shows them. The pods of replicated job `ps`
are the parameter servers, those of `worker` the workers (worker 0, the chief, is job 0,
pod 0); a JobSet without a `ps` replicated job (SLIMDEPLOY_TASKS 'worker=N') is a cluster
of workers that all-reduce. Task k of the cluster, counting the ps tasks first, listens
on base port + k, so the same environment also runs with hostNetwork or on one host.

`task_from_environ` returns the `deployment.cluster.task_spec.TaskSpec` (None outside a JobSet);
mistakes raise `ClusterError`, one line naming the variable.
"""

import re

from deployment.cluster.task_spec import ClusterError, TaskSpec, check_task

__all__ = ['task_from_environ', 'VARIABLES', 'ROLES']

ROLES = ('ps', 'worker')
# Name -> where its value comes from; JOBSET_NAME's presence marks a JobSet pod.
VARIABLES = {
    'JOBSET_NAME': "annotation jobset.sigs.k8s.io/jobset-name",
    'REPLICATED_JOB_NAME': "annotation jobset.sigs.k8s.io/replicatedjob-name",
    'JOB_INDEX': "annotation jobset.sigs.k8s.io/job-index",
    'JOB_COMPLETION_INDEX': "set by Kubernetes in an Indexed Job's pods",
    'REPLICATED_JOB_REPLICAS': "annotation jobset.sigs.k8s.io/replicatedjob-replicas "
                               "(optional: checked against SLIMDEPLOY_TASKS)",
    'JOBSET_SUBDOMAIN': "the manifest's spec.network.subdomain, if it sets one",
    'SLIMDEPLOY_TASKS': "the manifest: each replicated job's Jobs, or Jobs x pods: "
                        "'ps=2,worker=10', 'ps=1,worker=1x4', 'worker=8' (no ps)",
    'SLIMDEPLOY_BASE_PORT': "the manifest: task k (ps first) listens on this + k",
}
_SIZE = re.compile(r'^(\d+)(?:x(\d+))?$')


def _get(environ, name):
  value = environ.get(name, '').strip()
  if not value:
    raise ClusterError('%s is not set in this JobSet pod (JOBSET_NAME=%s); it must hold the %s'
                       % (name, environ.get('JOBSET_NAME'), VARIABLES[name]))
  return value


def _integer(environ, name, low=0, high=None):
  value = _get(environ, name)
  if not value.isdigit() or int(value) < low or (high is not None and int(value) > high):
    bound = '%d..%d' % (low, high) if high is not None else '>= %d' % low
    raise ClusterError('%s=%s is not an integer in %s' % (name, value, bound))
  return int(value)


def _parse_tasks(text):
  """'ps=2,worker=1x4' -> {'ps': (2, 1), 'worker': (1, 4)}: (Jobs, pods per Job); 'ps'
  absent without parameter servers."""
  sizes = {}
  for item in text.split(','):
    role, _, size = item.strip().partition('=')
    match = _SIZE.match(size.strip())
    if role not in ROLES or role in sizes or not match or int(match.group(1)) < 1 or (
        match.group(2) and int(match.group(2)) < 1):
      raise ClusterError("SLIMDEPLOY_TASKS=%s: %r is not ROLE=JOBS or ROLE=JOBSxPODS with a "
                         "role of %s, each once, and sizes >= 1 (e.g. 'ps=2,worker=10')"
                         % (text, item, ', '.join(ROLES)))
    sizes[role] = (int(match.group(1)), int(match.group(2) or 1))
  if 'worker' not in sizes:
    raise ClusterError("SLIMDEPLOY_TASKS=%s has no worker: a cluster needs workers, with or "
                       "without ps (e.g. 'ps=2,worker=10' or 'worker=8')" % text)
  return sizes


def _hosts(jobset, subdomain, role, size, first_port):
  jobs, pods = size
  return tuple('%s-%s-%d-%d.%s:%d' % (jobset, role, job, pod, subdomain,
                                      first_port + job * pods + pod)
               for job in range(jobs) for pod in range(pods))


def task_from_environ(environ):
  """The TaskSpec of this JobSet pod, or None when JOBSET_NAME is not set.

  Args:
    environ: a mapping like os.environ.

  Raises:
    ClusterError: a missing or malformed variable, an index out of range, or a replica
      count that disagrees with SLIMDEPLOY_TASKS (one line naming the variable).
  """
  jobset = environ.get('JOBSET_NAME', '').strip()
  if not jobset:
    return None
  sizes = _parse_tasks(_get(environ, 'SLIMDEPLOY_TASKS'))
  role = _get(environ, 'REPLICATED_JOB_NAME')
  if role in ROLES and role not in sizes:
    raise ClusterError('REPLICATED_JOB_NAME=%s but SLIMDEPLOY_TASKS=%s has no %s: list every '
                       'replicated job there' % (role, environ['SLIMDEPLOY_TASKS'], role))
  if role not in sizes:
    raise ClusterError('REPLICATED_JOB_NAME=%s is not a training role; valid: %s (name the '
                       "JobSet's replicated jobs so)" % (role, ', '.join(ROLES)))
  jobs, pods = sizes[role]
  replicas = environ.get('REPLICATED_JOB_REPLICAS', '').strip()
  if replicas and replicas != str(jobs):
    raise ClusterError('REPLICATED_JOB_REPLICAS=%s but SLIMDEPLOY_TASKS=%s gives %s %d '
                       'Jobs: make the replicated job\'s replicas and SLIMDEPLOY_TASKS agree'
                       % (replicas, environ['SLIMDEPLOY_TASKS'], role, jobs))
  index = (_integer(environ, 'JOB_INDEX', 0, jobs - 1) * pods +
           _integer(environ, 'JOB_COMPLETION_INDEX', 0, pods - 1))
  sizes.setdefault('ps', (0, 1))   # No ps replicated job: workers only.
  num_ps = sizes['ps'][0] * sizes['ps'][1]
  num_tasks = num_ps + sizes['worker'][0] * sizes['worker'][1]
  base = _integer(environ, 'SLIMDEPLOY_BASE_PORT', 1, 65536 - num_tasks)
  subdomain = environ.get('JOBSET_SUBDOMAIN', '').strip() or jobset
  spec = TaskSpec(_hosts(jobset, subdomain, 'ps', sizes['ps'], base),
                  _hosts(jobset, subdomain, 'worker', sizes['worker'], base + num_ps),
                  role, index, 'JobSet')
  return check_task(spec, 'JobSet ps', 'JobSet worker', 'REPLICATED_JOB_NAME', 'JOB_INDEX')
