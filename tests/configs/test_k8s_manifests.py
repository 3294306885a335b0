"""configs/k8s/: every manifest validates offline against the vendored JobSet CRD and
Kubernetes schemas (configs/k8s/schemas/README.md), and the JobSet's pods compute one
consistent cluster at the names and ports JobSet gives them, restart as designed, and are
all covered by the NetworkPolicy that keeps TensorFlow's unauthenticated gRPC to them."""

import copy
import glob
import json
import os
import re

import jsonschema
import pytest
import referencing

from core.params import config_from_argv
from deployment.cluster import jobset_env
from tests import jobset_pods
from training.config import TrainConfig

K8S = os.path.join(jobset_pods.ROOT, 'configs', 'k8s')
SCHEMAS = os.path.join(K8S, 'schemas')
MANIFESTS = sorted(glob.glob(os.path.join(K8S, '*.yaml')))
TFJOB = os.path.join(jobset_pods.ROOT, 'configs', 'cluster',
                     'ucf101_i3d_rgb_kinetics_10x8_64f_sync_tfjob.yaml')
KINDS = {'Job': 'job-batch-v1.json', 'NetworkPolicy': 'networkpolicy-networking-v1.json',
         'PersistentVolumeClaim': 'persistentvolumeclaim-v1.json'}
PERMANENT, RETRIED = {1, 2, 3, 6}, {137, 138, 143}   # docs/cluster.md, exit codes
SERVICE_PERMANENT = {1, 2}   # datasets.data_service: a bug, a bad flag or a port taken
DNS_1035 = re.compile(r'^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$')


def load_schema(name):
  with open(os.path.join(SCHEMAS, name)) as handle:
    return json.load(handle)


REGISTRY = referencing.Registry().with_resource(
    'https://kubernetes.io/api/_definitions.json',
    referencing.Resource.from_contents(load_schema('_definitions.json')))


def closed(schema):
  """The CRD schema with unknown fields made errors, as a strict API server makes them."""
  if isinstance(schema, list):
    return [closed(item) for item in schema]
  if not isinstance(schema, dict):
    return schema
  result = {key: ({n: closed(s) for n, s in value.items()} if key == 'properties'
                  else closed(value)) for key, value in schema.items()}
  if ('properties' in result and 'additionalProperties' not in result and
      not result.get('x-kubernetes-preserve-unknown-fields')):
    result['additionalProperties'] = False
  return result


def errors(schema, document):
  validator = jsonschema.Draft202012Validator(schema, registry=REGISTRY)
  return ['%s: %s' % ('/'.join(map(str, e.absolute_path)), e.message)
          for e in validator.iter_errors(document)]


def validate_jobset(jobset):
  found = errors(closed(load_schema('jobset.x-k8s.io_v1alpha2.json')), jobset)
  meta = {'$ref': 'https://kubernetes.io/api/_definitions.json#/$defs/'
                  'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta'}
  found += errors(meta, jobset['metadata'])
  for rjob in jobset['spec']['replicatedJobs']:   # Each template as the Job it becomes.
    job = dict(rjob['template'], apiVersion='batch/v1', kind='Job')
    found += ['%s: %s' % (rjob['name'], e) for e in errors(load_schema(KINDS['Job']), job)]
  return found


@pytest.fixture(scope='module')
def docs():
  return jobset_pods.documents(jobset_pods.JOBSET_MANIFEST)


@pytest.fixture(scope='module')
def pods(docs):
  return jobset_pods.pods(jobset_pods.the('JobSet', docs))


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_each_manifest_validates_and_opens_with_its_command(path):
  with open(path) as handle:
    assert 'kubectl apply -f ' + os.path.relpath(path, jobset_pods.ROOT) in handle.read()
  for doc in jobset_pods.documents(path):
    if doc['kind'] == 'JobSet':
      assert doc['apiVersion'] == 'jobset.x-k8s.io/v1alpha2'
      assert validate_jobset(doc) == []
    else:
      assert errors(load_schema(KINDS[doc['kind']]), doc) == []


def test_the_validation_catches_a_misspelt_field_at_every_level(docs):
  jobset = jobset_pods.the('JobSet', docs)
  assert validate_jobset(jobset) == []
  bad = copy.deepcopy(jobset)
  bad['spec']['successPolicy']['targets'] = ['worker']                         # JobSet CRD
  bad['spec']['replicatedJobs'][0]['template']['spec']['backofLimit'] = 1      # Job
  pod = bad['spec']['replicatedJobs'][1]['template']['spec']['template']['spec']
  pod['containers'][0]['volumeMount'] = []                                     # container
  pod['terminationGracePeriodSeconds'] = 'long'                                # a type
  bad['spec']['successPolicy']['operator'] = 'Most'                            # an enum
  bad['spec']['failurePolicy']['restartStrategy'] = 'Blocking'                 # the new
  bad['spec']['replicatedJobs'][1]['template']['spec']['activeDeadline'] = 60  # fields
  found = '\n'.join(validate_jobset(bad))
  for word in ("'targets'", "'backofLimit'", "'volumeMount'", "'long'", "'Most'",
               "'Blocking'", "'activeDeadline'"):
    assert word in found


def trainers(pods):
  return [pod for pod in pods if pod.replicated_job in jobset_pods.TRAINING_ROLES]


def test_every_pod_computes_the_same_cluster_at_its_jobset_name_and_port(docs, pods):
  pods = trainers(pods)
  specs = [jobset_env.task_from_environ(pod.env) for pod in pods]
  assert len({(s.ps_hosts, s.worker_hosts) for s in specs}) == 1
  assert (specs[0].num_ps, specs[0].num_workers) == (2, 10)
  policy_ports = jobset_pods.the('NetworkPolicy', docs)['spec']['ingress'][0]['ports']
  ports = set()
  for pod, spec in zip(pods, specs):
    host, port = spec.address.rsplit(':', 1)
    assert host == pod.fqdn and spec.job_name == pod.replicated_job
    assert DNS_1035.match(pod.hostname + '-abcde')   # JobSet's webhook: pod name + suffix
    ports.add(int(port))
  assert ports == set(range(2222, 2222 + 12))   # Task k on 2222 + k: unique per host too.
  assert [p['port'] for p in policy_ports] == [min(ports)]
  assert [s.is_chief for s in specs].count(True) == 1 and specs[2].is_chief


def test_a_pod_whose_replicas_disagree_with_slimdeploy_tasks_refuses_to_start(docs):
  jobset = copy.deepcopy(jobset_pods.the('JobSet', docs))
  jobset['spec']['replicatedJobs'][1]['replicas'] = 12   # ...without SLIMDEPLOY_TASKS
  pod = trainers(jobset_pods.pods(jobset))[-1]
  with pytest.raises(jobset_env.ClusterError, match='REPLICATED_JOB_REPLICAS=12 but '
                     'SLIMDEPLOY_TASKS=ps=2,worker=10'):
    jobset_env.task_from_environ(pod.env)


def test_restarts_are_chosen_for_parameter_server_training(docs):
  spec = jobset_pods.the('JobSet', docs)['spec']
  assert spec['successPolicy'] == {'operator': 'All', 'targetReplicatedJobs': ['worker']}
  rules = [(r['action'], r['onJobFailureReasons'], r.get('targetReplicatedJobs'))
           for r in spec['failurePolicy']['rules']]
  assert rules == [('FailJobSet', ['PodFailurePolicy'], None),
                   ('RestartJobSet', ['BackoffLimitExceeded'], None),
                   ('RestartJobSet', ['DeadlineExceeded'], ['worker'])]   # The time limit.
  assert spec['failurePolicy']['maxRestarts'] >= 1
  # Every pod of an attempt gone before the next starts: no chief beside one still saving.
  assert spec['failurePolicy']['restartStrategy'] == 'BlockingRecreate'
  for rjob in spec['replicatedJobs']:
    job = rjob['template']['spec']
    assert job['template']['spec']['restartPolicy'] == 'Never'  # podFailurePolicy needs it
    fail, ignore = job['podFailurePolicy']['rules']
    permanent = PERMANENT if rjob['name'] in jobset_pods.TRAINING_ROLES else SERVICE_PERMANENT
    assert fail['action'] == 'FailJob' and set(fail['onExitCodes']['values']) == permanent
    assert fail['onExitCodes']['containerName'] == job['template']['spec'][
        'containers'][0]['name']
    assert not RETRIED & set(fail['onExitCodes']['values'])
    assert ignore == {'action': 'Ignore', 'onPodConditions': [{'type': 'DisruptionTarget'}]}
    assert job['backoffLimit'] >= 1 and job['completions'] == job['parallelism'] == 1
    # The time limit on the workers only: the ps tasks must hold the variables while the
    # chief saves on its SIGTERM, within its grace period.
    assert ('activeDeadlineSeconds' in job) == (rjob['name'] == 'worker'), rjob['name']


def test_the_time_limit_is_the_slurm_examples_and_fits_the_recipe(docs):
  """4 h per attempt, as docs/cluster.md's sbatch --time=04:00:00, and a grace period for
  the chief's save at the deadline's SIGTERM."""
  spec = jobset_pods.the('JobSet', docs)['spec']
  worker = spec['replicatedJobs'][1]['template']['spec']
  assert worker['activeDeadlineSeconds'] == 4 * 3600
  with open(os.path.join(jobset_pods.ROOT, 'docs', 'cluster.md')) as handle:
    assert '--time=04:00:00' in handle.read()
  assert worker['template']['spec']['terminationGracePeriodSeconds'] >= 60   # The save.


def test_the_train_dir_is_on_the_shared_read_write_many_claim(docs):
  claim = jobset_pods.the('PersistentVolumeClaim', jobset_pods.documents(
      os.path.join(K8S, 'slimdeploy_shared_pvc.yaml')))
  assert claim['spec']['accessModes'] == ['ReadWriteMany']
  assert 'PersistentVolumeClaim' not in [d['kind'] for d in docs]  # delete -f keeps data
  worker = jobset_pods.the('JobSet', docs)['spec']['replicatedJobs'][1]
  pod = worker['template']['spec']['template']['spec']
  volume, = pod['volumes']
  assert volume['persistentVolumeClaim']['claimName'] == claim['metadata']['name']
  mount, = [m['mountPath'] for m in pod['containers'][0]['volumeMounts']
            if m['name'] == volume['name']]
  train_dir, = [a.split('=', 1)[1] for a in pod['containers'][0]['command']
                if a.startswith('--train_dir=')]
  assert train_dir.startswith(mount + '/')


def selects(selector, labels):
  """Kubernetes' LabelSelector semantics: matchLabels and matchExpressions."""
  tests = {'In': lambda key, values: labels.get(key) in values,
           'NotIn': lambda key, values: labels.get(key) not in values,
           'Exists': lambda key, values: key in labels,
           'DoesNotExist': lambda key, values: key not in labels}
  return (all(labels.get(k) == v for k, v in selector.get('matchLabels', {}).items()) and
          all(tests[e['operator']](e['key'], e.get('values', ()))
              for e in selector.get('matchExpressions', ())))


def test_the_network_policy_admits_the_task_ports_only_from_the_jobs_own_pods(docs, pods):
  policy = jobset_pods.the('NetworkPolicy', docs)['spec']
  assert 'Ingress' in policy['policyTypes']
  rule, = policy['ingress']
  peer, = rule['from']
  assert list(peer) == ['podSelector']   # No namespaceSelector or ipBlock: same namespace.
  roles = {pod.replicated_job for pod in pods}
  assert roles == {'ps', 'worker', 'dispatcher', 'data-worker'}
  admitted = set()
  for each in rule['ports']:
    assert each['protocol'] == 'TCP'
    admitted |= set(range(each['port'], each.get('endPort', each['port']) + 1))
  for pod in pods:
    assert selects(policy['podSelector'], pod.labels), pod.hostname
    assert selects(peer['podSelector'], pod.labels), pod.hostname
    assert listened_port(pod) in admitted, (pod.hostname, listened_port(pod))
  name = jobset_pods.the('JobSet', docs)['metadata']['name']
  other_job = dict(pods[0].labels, **{'jobset.sigs.k8s.io/jobset-name': name + '-other'})
  assert not selects(peer['podSelector'], other_job)
  assert not selects(peer['podSelector'], {'app': 'anything-else'})


def flag(pod, name):
  """The value of --name in the pod's command ($(VAR) expanded), or None."""
  found = [arg.split('=', 1)[1] for arg in pod.command if arg.startswith('--%s=' % name)]
  return found[-1] if found else None


def listened_port(pod):
  """The port the pod's process listens on: a trainer's from its JobSet environment
  (deployment/cluster/jobset_env.py), a data-service server's from its --port."""
  if pod.replicated_job in jobset_pods.TRAINING_ROLES:
    return int(jobset_env.task_from_environ(pod.env).address.rsplit(':', 1)[1])
  assert pod.command[:3] == ['python', '-m', 'datasets.data_service'], pod.command
  return int(flag(pod, 'port'))


def test_the_data_service_pods_reach_each_other_and_the_trainers_at_their_pod_names(pods):
  dispatcher, = [pod for pod in pods if pod.replicated_job == 'dispatcher']
  workers = [pod for pod in pods if pod.replicated_job == 'data-worker']
  assert flag(dispatcher, 'role') == 'dispatcher' and len(workers) == 4
  address = '%s:%d' % (dispatcher.fqdn, listened_port(dispatcher))
  for pod in workers:
    assert flag(pod, 'role') == 'worker' and flag(pod, 'dispatcher_address') == address
    assert flag(pod, 'worker_address') == '%s:%d' % (pod.fqdn, listened_port(pod))
  for pod in trainers(pods):
    expected = address if pod.replicated_job == 'worker' else None
    assert flag(pod, 'data_service_address') == expected, pod.hostname
  # The journal on the shared claim, so a replaced dispatcher pod resumes from it.
  spec = dispatcher.container
  mounts = [m['mountPath'] for m in spec['volumeMounts']]
  assert [m for m in mounts if flag(dispatcher, 'work_dir').startswith(m + '/')] == ['/shared']
  assert all('$(' not in arg for pod in pods for arg in pod.command)   # Every name defined.


def test_the_tfjob_stays_marked_legacy_with_the_reason():
  with open(TFJOB) as handle:
    header = handle.read().split('apiVersion', 1)[0]
  for words in ('LEGACY', 'kubeflow/trainer#2699', 'kueue#12620',
                'configs/k8s/ucf101_i3d_rgb_kinetics_10x8_64f_sync_jobset.yaml'):
    assert words in header


ALLREDUCE = os.path.join(K8S, 'ucf101_i3d_rgb_kinetics_10x8_64f_allreduce_jobset.yaml')


@pytest.fixture(scope='module')
def allreduce_docs():
  return jobset_pods.documents(ALLREDUCE)


def test_the_allreduce_variant_is_ten_workers_without_ps_at_their_names_and_ports(
    allreduce_docs, monkeypatch):
  jobset = jobset_pods.the('JobSet', allreduce_docs)
  assert validate_jobset(jobset) == []
  names = [rjob['name'] for rjob in jobset['spec']['replicatedJobs']]
  assert names == ['worker', 'dispatcher', 'data-worker']   # No ps replicated job.
  pods = trainers(jobset_pods.pods(jobset))
  specs = [jobset_env.task_from_environ(pod.env) for pod in pods]
  assert {(s.ps_hosts, s.worker_hosts) for s in specs} == {((), tuple(
      '%s:%d' % (pod.fqdn, 2222 + i) for i, pod in enumerate(pods)))}
  assert [s.task_index for s in specs] == list(range(10)) and specs[0].is_chief
  for pod in pods:
    # The trainer's flags as it reads them in /app (this checkout): the all-reduce recipe.
    monkeypatch.chdir(jobset_pods.ROOT)
    config, _ = config_from_argv(TrainConfig, pod.command[2:])
    assert (config.variable_update, config.num_ps_tasks, config.sync_replicas) == (
        'replicated', 0, False)    # The all-reduce is the synchronisation.
    assert DNS_1035.match(pod.hostname + '-abcde')
  resized = trainers(jobset_pods.pods(jobset_pods.scaled(jobset, worker=4)))
  assert [jobset_env.task_from_environ(p.env).num_workers for p in resized] == [4] * 4


def test_the_allreduce_variants_policy_lets_every_worker_reach_every_other(allreduce_docs):
  """Each worker talks to each other one (the ring), and to the data service."""
  policy = jobset_pods.the('NetworkPolicy', allreduce_docs)['spec']
  rule, = policy['ingress']
  peer, = rule['from']
  admitted = {port for each in rule['ports']
              for port in range(each['port'], each.get('endPort', each['port']) + 1)}
  pods = jobset_pods.pods(jobset_pods.the('JobSet', allreduce_docs))
  for pod in pods:
    assert selects(policy['podSelector'], pod.labels) and selects(peer['podSelector'],
                                                                   pod.labels)
    assert listened_port(pod) in admitted, pod.hostname
  assert admitted == {listened_port(pod) for pod in pods}   # Those ports and no others.


def test_the_allreduce_variant_restarts_the_whole_jobset_on_any_worker_failure(
    allreduce_docs):
  spec = jobset_pods.the('JobSet', allreduce_docs)['spec']
  assert spec['failurePolicy']['restartStrategy'] == 'BlockingRecreate'
  rules = {r['name']: (r['action'], r['onJobFailureReasons']) for r in
           spec['failurePolicy']['rules']}
  assert rules['tooManyTaskFailures'] == ('RestartJobSet', ['BackoffLimitExceeded'])
  assert rules['permanentExitCode'] == ('FailJobSet', ['PodFailurePolicy'])
  worker, = [r for r in spec['replicatedJobs'] if r['name'] == 'worker']
  job = worker['template']['spec']
  assert job['backoffLimit'] == 0   # No worker rejoins a running all-reduce alone.
  fail, ignore = job['podFailurePolicy']['rules']
  assert set(fail['onExitCodes']['values']) == PERMANENT and not RETRIED & set(
      fail['onExitCodes']['values'])
  assert ignore['action'] == 'Ignore'
  assert job['activeDeadlineSeconds'] == 4 * 3600
