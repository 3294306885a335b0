"""deployment/cluster/slurm_env.py and --addressing=slurm (addressing.find_task): the cluster
every task of an srun step computes from its environment, checked against layouts worked
out by hand and, for host lists, against Slurm's own `scontrol show hostnames`."""

import os
import subprocess

import pytest

from core.errors import ConfigError
from deployment.cluster import addressing, preflight, slurm_env
from deployment.cluster.task_spec import ClusterError
from tests import slurm_cluster

HOSTLISTS = {
    'node[01-03,07],gpu5': ['node01', 'node02', 'node03', 'node07', 'gpu5'],
    'r[1-2]-n[08-10]': ['r1-n08', 'r1-n09', 'r1-n10', 'r2-n08', 'r2-n09', 'r2-n10'],
    'a[9-11]': ['a9', 'a10', 'a11'],
    'c[0-1],d': ['c0', 'c1', 'd'],
    'n[1-2],m[3]': ['n1', 'n2', 'm3'],
    'vm': ['vm'],
}


def step(procid, ntasks=5, nodelist='n[1-3]', per_node='2(x2),1', **extra):
  """An srun task's environment: 5 tasks on n1 n2 n3 laid out 2, 2, 1 (block)."""
  environ = {'SLURM_JOB_ID': '1234', 'SLURM_STEP_ID': '0', 'SLURM_PROCID': str(procid),
             'SLURM_STEP_NUM_TASKS': str(ntasks), 'SLURM_STEP_NODELIST': nodelist,
             'SLURM_STEP_TASKS_PER_NODE': per_node, 'SLURM_DISTRIBUTION': 'block'}
  environ.update(extra)
  return environ


@pytest.mark.parametrize('text', sorted(HOSTLISTS))
def test_hostlists_expand_as_documented(text):
  assert slurm_env.expand_hostlist(text) == HOSTLISTS[text]


@pytest.mark.slow
def test_hostlists_expand_as_scontrol_does(tmp_path):
  reason = slurm_cluster.install()
  if reason:
    pytest.skip(reason)
  conf = tmp_path / 'slurm.conf'   # scontrol parses host lists itself; no daemon.
  conf.write_text('ClusterName=t\nSlurmctldHost=localhost\n')
  env = dict(os.environ, SLURM_CONF=str(conf))
  for text in HOSTLISTS:
    printed = subprocess.run(['scontrol', 'show', 'hostnames', text], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
    assert slurm_env.expand_hostlist(text) == printed, text


@pytest.mark.parametrize('text', ['n[1-', 'n[3-1]', 'n[a]', 'n]', 'a,,b', ''])
def test_a_broken_hostlist_is_one_line_naming_the_variable(text):
  with pytest.raises(ClusterError, match='SLURM_STEP_NODELIST=') as error:
    slurm_env.expand_hostlist(text)
  assert '\n' not in str(error.value)


def test_tasks_per_node_and_the_two_layouts():
  assert slurm_env.expand_tasks_per_node('2(x3),1') == [2, 2, 2, 1]
  assert slurm_env.task_nodes([2, 2, 1], 'block') == [0, 0, 1, 1, 2]
  assert slurm_env.task_nodes([2, 2, 1], 'cyclic') == [0, 1, 2, 0, 1]
  with pytest.raises(ClusterError, match="SLURM_STEP_TASKS_PER_NODE='2x3'"):
    slurm_env.expand_tasks_per_node('2x3')


def test_every_task_computes_the_same_cluster_first_p_tasks_are_ps():
  slot = 20000 + (1234 % 2500) * 16   # The job's ports without reserved ones.
  specs = [slurm_env.task_from_environ(step(i), 2) for i in range(5)]
  assert {(s.ps_hosts, s.worker_hosts) for s in specs} == {(
      ('n1:%d' % slot, 'n1:%d' % (slot + 1)),
      ('n2:%d' % slot, 'n2:%d' % (slot + 1), 'n3:%d' % slot))}
  assert [(s.job_name, s.task_index) for s in specs] == [
      ('ps', 0), ('ps', 1), ('worker', 0), ('worker', 1), ('worker', 2)]
  assert specs[2].is_chief and specs[2].source == 'Slurm job 1234'


def test_reserved_ports_and_a_cyclic_layout():
  # 12 tasks on 10 nodes, cyclic: ps 0 and 1 beside workers 8 and 9 (docs/cluster.md).
  environ = step(11, ntasks=12, nodelist='g[00-09]', per_node='2(x2),1(x8)',
                 SLURM_DISTRIBUTION='cyclic', SLURM_STEP_RESV_PORTS='24000-24001',
                 SLURM_GTIDS='1,11')
  task = slurm_env.task_from_environ(environ, 2)
  assert task.ps_hosts == ('g00:24000', 'g01:24000')
  assert task.worker_hosts == tuple('g%02d:24000' % n for n in range(2, 10)) + (
      'g00:24001', 'g01:24001')
  assert (task.job_name, task.task_index, task.address) == ('worker', 9, 'g01:24001')


def test_two_jobs_on_a_node_get_different_ports():
  first = slurm_env.task_from_environ(step(0, SLURM_JOB_ID='77'), 1)
  second = slurm_env.task_from_environ(step(0, SLURM_JOB_ID='78'), 1)
  ports = lambda t: {h.rsplit(':', 1)[1] for h in t.ps_hosts + t.worker_hosts}
  assert not ports(first) & ports(second)
  assert all(20000 <= int(p) <= 59999 for p in ports(first) | ports(second))


@pytest.mark.parametrize('extra, num_ps, match', [
    ({}, 5, r'--num_ps_tasks=5 .* valid: 0..4 \(0: every task a worker\)'),
    ({'SLURM_DISTRIBUTION': 'plane=2'}, 1, 'SLURM_DISTRIBUTION=plane=2'),
    ({'SLURM_GTIDS': '0,2'}, 1, 'SLURM_GTIDS=0,2'),
    ({'SLURM_STEP_TASKS_PER_NODE': '2,2'}, 1, 'gives 3 nodes but'),
    ({'SLURM_STEP_RESV_PORTS': '24000'}, 1, 'srun --resv-ports=2'),
    ({'SLURM_PROCID': 'x'}, 1, "SLURM_PROCID='x'"),
])
def test_mistakes_are_one_line_naming_the_variable(extra, num_ps, match):
  with pytest.raises(ClusterError, match=match) as error:
    slurm_env.task_from_environ(step(0, **extra), num_ps)
  assert '\n' not in str(error.value)


def test_without_ps_every_task_of_the_step_is_a_worker():
  slot = 20000 + (1234 % 2500) * 16
  specs = [slurm_env.task_from_environ(step(i), 0) for i in range(5)]
  assert {(s.ps_hosts, s.worker_hosts) for s in specs} == {((), (
      'n1:%d' % slot, 'n1:%d' % (slot + 1), 'n2:%d' % slot, 'n2:%d' % (slot + 1),
      'n3:%d' % slot))}
  assert [(s.job_name, s.task_index) for s in specs] == [('worker', i) for i in range(5)]
  assert specs[0].is_chief and 'cluster of 5 workers without ps' in specs[0].describe()
  assert addressing.find_task('slurm', NO_FLAGS, step(3), 0) == specs[3]
  assert addressing.find_task('auto', NO_FLAGS, step(3), 0) == specs[3]


def test_the_planned_step_of_a_job_without_ps_is_one_of_workers():
  """training.check_cluster's view from the submitting host (preflight.slurm_step_environ)
  reads as the chief of a worker-only step."""
  plan = preflight.PlannedJob(slurm_ntasks=4, slurm_nodes=2)
  task = slurm_env.task_from_environ(preflight.slurm_step_environ(plan, 0))
  assert (task.num_ps, task.num_workers, task.is_chief) == (0, 4, True)
  with pytest.raises(ConfigError, match=r'--num_ps_tasks=4 with --slurm_ntasks=4: .* '
                     r'valid: 1..3, or 0 for workers only'):
    preflight.slurm_layout(plan, 4)


def test_p_from_the_environment_when_not_given():
  task = slurm_env.task_from_environ(step(1, SLIMDEPLOY_NUM_PS='2'))
  assert (task.num_ps, task.job_name, task.task_index) == (2, 'ps', 1)
  task = slurm_env.task_from_environ(step(1))   # Unset: 0, workers only.
  assert (task.num_ps, task.job_name, task.task_index) == (0, 'worker', 1)
  with pytest.raises(ClusterError, match="SLIMDEPLOY_NUM_PS='two'"):
    slurm_env.task_from_environ(step(1, SLIMDEPLOY_NUM_PS='two'))


def test_no_cluster_outside_a_step_or_in_a_one_task_step():
  assert slurm_env.task_from_environ({'SLURM_JOB_ID': '5', 'SLURM_PROCID': '0'}, 1) is None
  one = step(0, ntasks=1, nodelist='n1', per_node='1')
  assert slurm_env.task_from_environ(one, 0) is None


NO_FLAGS = ((), (), None, 0)
FLAGS = (('h:1',), ('h:2',), 'worker', 0)
TF_CONFIG = '{"cluster": {"ps": ["t:1"], "worker": ["t:2"]}, "task": {"type": "worker"}}'


def test_auto_takes_flags_or_tf_config_before_slurm_then_slurm():
  environ = dict(step(2), TF_CONFIG=TF_CONFIG)
  assert addressing.find_task('auto', FLAGS, step(2), 1).source == 'flags'
  assert addressing.find_task('auto', NO_FLAGS, environ, 1).source == 'TF_CONFIG'
  assert addressing.find_task('auto', NO_FLAGS, step(2), 1).source == 'Slurm job 1234'
  assert addressing.find_task('auto', NO_FLAGS, {}, 0) is None
  # An explicit choice reads that source only.
  assert addressing.find_task('slurm', NO_FLAGS, environ, 1).source == 'Slurm job 1234'
  assert addressing.find_task('flags', FLAGS, environ, 1).source == 'flags'
  assert addressing.find_task('tf_config', NO_FLAGS, environ, 1).source == 'TF_CONFIG'


@pytest.mark.parametrize('name, host_flags, environ, match', [
    ('slurm', NO_FLAGS, {}, '--addressing=slurm found no cluster: it needs a task of an srun'),
    ('slurm', FLAGS, step(0), '--addressing=slurm reads the cluster from the environment'),
    ('flags', NO_FLAGS, step(0), '--addressing=flags needs --ps_hosts'),
    ('tf_config', NO_FLAGS, {}, '--addressing=tf_config found no cluster: it needs TF_CONFIG'),
    ('k8s', NO_FLAGS, {}, '--addressing=k8s is not known; valid: auto, flags, tf_config, '
                          'slurm, jobset'),
])
def test_addressing_mistakes(name, host_flags, environ, match):
  with pytest.raises(ClusterError, match=match):
    addressing.find_task(name, host_flags, environ, 1)


def _ports(addresses):
  return [int(a.rsplit(':', 1)[1]) for a in addresses]


def test_a_data_service_step_counts_its_ports_from_the_top_of_the_jobs_slot():
  # The job's 5 training tasks (2, 2, 1 on n1..n3) and its service step (3 tasks, 1 each).
  slot = 20000 + (1234 % 2500) * 16
  service = [slurm_env.service_from_environ(step(
      i, ntasks=3, per_node='1(x3)', SLIMDEPLOY_JOB_TASKS='8')) for i in range(3)]
  assert [t.role for t in service] == ['dispatcher', 'worker', 'worker']
  assert [t.address for t in service] == ['n1:%d' % (slot + 15), 'n2:%d' % (slot + 15),
                                          'n3:%d' % (slot + 15)]
  assert {t.dispatcher_address for t in service} == {'n1:%d' % (slot + 15)}
  training = slurm_env.task_from_environ(step(0, SLIMDEPLOY_JOB_TASKS='8'), 1)
  assert not set(_ports(training.ps_hosts + training.worker_hosts)) & {t.port for t in service}
  # With reserved ports each step has its own from Slurm.
  reserved = slurm_env.service_from_environ(step(1, ntasks=3, per_node='1(x3)',
                                                 SLURM_STEP_RESV_PORTS='24005'))
  assert reserved.address == 'n2:24005' and reserved.dispatcher_address == 'n1:24005'


def test_the_two_steps_must_fit_the_slot_on_any_node_they_may_share():
  # 10 training tasks on one node leave 6 ports: a service step of 7 may meet them.
  crowded = dict(step(0, ntasks=10, nodelist='n1', per_node='10'), SLIMDEPLOY_JOB_TASKS='17')
  with pytest.raises(ClusterError, match='up to 17 tasks of Slurm job 1234 .* more than the '
                     '16 ports') as error:
    slurm_env.task_from_environ(crowded, 1)
  assert '\n' not in str(error.value)
  with pytest.raises(ClusterError, match='up to 17 tasks'):
    slurm_env.service_from_environ(dict(crowded, SLURM_STEP_NUM_TASKS='7',
                                        SLURM_STEP_TASKS_PER_NODE='7'))
  assert slurm_env.task_from_environ(dict(crowded, SLIMDEPLOY_JOB_TASKS='16'), 1)
  # Reserved ports are the step's own: no slot to share.
  assert slurm_env.task_from_environ(dict(crowded, SLURM_STEP_RESV_PORTS='24000-24009'), 1)
  with pytest.raises(ClusterError, match="SLIMDEPLOY_JOB_TASKS='many'"):
    slurm_env.task_from_environ(step(0, SLIMDEPLOY_JOB_TASKS='many'), 1)
  with pytest.raises(ClusterError, match='--addressing=slurm needs an srun step'):
    slurm_env.service_from_environ({'SLURM_JOB_ID': '5'})
