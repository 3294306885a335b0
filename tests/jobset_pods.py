"""The pods a JobSet manifest makes, as JobSet v0.12.0 and Kubernetes would make them.

For each replica j of each replicated job and each completion index p of its Indexed
Job: the hostname `<jobset>-<job>-<j>-<p>`, the subdomain (network.subdomain, else the
JobSet's name), the labels and annotations JobSet's controller adds
(`labelAndAnnotateObject`), and the container's environment with every downward-API
`fieldRef` resolved against them, plus JOB_COMPLETION_INDEX (Kubernetes adds it to an
Indexed Job's pods), and the command with `$(VAR)` expanded from that environment as the
kubelet expands it (`$$` a literal `$`, an undefined name left as written). The manifest
tests and the loopback runs use this, so the environment the tasks see is the one the
manifest produces.
"""

import copy
import dataclasses
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBSET_MANIFEST = os.path.join(ROOT, 'configs', 'k8s',
                               'ucf101_i3d_rgb_kinetics_10x8_64f_sync_jobset.yaml')
ALLREDUCE_MANIFEST = os.path.join(ROOT, 'configs', 'k8s',
                                  'ucf101_i3d_rgb_kinetics_10x8_64f_allreduce_jobset.yaml')
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_REFERENCE = re.compile(r'\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)')
TRAINING_ROLES = ('ps', 'worker')   # deployment/cluster/jobset_env.py's; the others run no trainer.


@dataclasses.dataclass
class Pod:
  hostname: str
  subdomain: str
  replicated_job: str
  labels: dict
  annotations: dict
  container: dict
  env: dict
  command: list

  fqdn = property(lambda self: '%s.%s' % (self.hostname, self.subdomain))


def documents(path):
  with open(path) as handle:
    return [doc for doc in yaml.safe_load_all(handle) if doc]


def the(kind, docs):
  found, = [doc for doc in docs if doc['kind'] == kind]
  return found


def scaled(jobset, **replicas):
  """A copy with other replica counts and SLIMDEPLOY_TASKS changed with them, as
  docs/cluster.md tells a user to resize (the NetworkPolicy's endPort, the third thing it
  names, does not reach the pods); one pod per Job, as in the manifest."""
  jobset = copy.deepcopy(jobset)
  for rjob in jobset['spec']['replicatedJobs']:
    rjob['replicas'] = replicas.get(rjob['name'], rjob['replicas'])
  tasks = ','.join('%s=%d' % (r['name'], r['replicas']) for r in jobset['spec']['replicatedJobs']
                   if r['name'] in TRAINING_ROLES)
  for rjob in jobset['spec']['replicatedJobs']:
    for container in rjob['template']['spec']['template']['spec']['containers']:
      for variable in container.get('env', []):
        if variable['name'] == 'SLIMDEPLOY_TASKS':
          variable['value'] = tasks
  return jobset


def _environment(container, labels, annotations, completion_index):
  env = {}
  for variable in container.get('env', []):
    if 'value' in variable:
      env[variable['name']] = str(variable['value'])
      continue
    match = _FIELD.match(variable['valueFrom']['fieldRef']['fieldPath'])
    if not match:
      raise ValueError('unsupported fieldRef %r' % variable)
    source = labels if match.group(1) == 'labels' else annotations
    env[variable['name']] = source[match.group(2)]
  env['JOB_COMPLETION_INDEX'] = str(completion_index)
  return env


def expand(text, env):
  """`text` with `$(NAME)` replaced from `env` as the kubelet does in command and args."""
  def replace(match):
    if match.group(0) == '$$':
      return '$'
    return env.get(match.group(1), match.group(0))
  return _REFERENCE.sub(replace, text)


def pods(jobset):
  """Every pod of `jobset` (a parsed JobSet), replicated jobs in order."""
  name = jobset['metadata']['name']
  spec = jobset['spec']
  subdomain = spec.get('network', {}).get('subdomain') or name
  total = sum(rjob['replicas'] for rjob in spec['replicatedJobs'])
  made = []
  for rjob in spec['replicatedJobs']:
    job_spec = rjob['template']['spec']
    template = job_spec['template']
    for job_index in range(rjob['replicas']):
      marks = {'jobset.sigs.k8s.io/jobset-name': name,
               'jobset.sigs.k8s.io/replicatedjob-name': rjob['name'],
               'jobset.sigs.k8s.io/replicatedjob-replicas': str(rjob['replicas']),
               'jobset.sigs.k8s.io/global-replicas': str(total),
               'jobset.sigs.k8s.io/job-index': str(job_index),
               'jobset.sigs.k8s.io/restart-attempt': '0'}
      for pod_index in range(job_spec.get('completions', 1)):
        metadata = template.get('metadata', {})
        labels = dict(metadata.get('labels', {}), **marks)
        annotations = dict(metadata.get('annotations', {}), **marks)
        annotations['batch.kubernetes.io/job-completion-index'] = str(pod_index)
        container, = template['spec']['containers']
        env = _environment(container, labels, annotations, pod_index)
        command = [expand(arg, env) for arg in container['command'] + container.get('args', [])]
        made.append(Pod('%s-%s-%d-%d' % (name, rjob['name'], job_index, pod_index),
                        subdomain, rjob['name'], labels, annotations, container, env,
                        command))
  return made
