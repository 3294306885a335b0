"""configs/cluster/: the ten-node recipe, its host list and its Kubeflow TFJob manifest
agree with each other, parse, resolve into the cluster they describe, and keep the
single-GPU recipe's schedule in epochs at the global batch."""

import glob
import os
import re

import pytest
from absl import flags

from training import lifecycle, optimization
from training import setup as train_setup
from training.config import TrainConfig
from core.params import config_from_flags, define_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, 'configs', 'cluster')
RECIPE = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync.cfg')
NODES = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync_10nodes.cfg')
TFJOB = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync_tfjob.yaml')
SINGLE_GPU = os.path.join(ROOT, 'configs', 'ucf101_i3d_rgb_kinetics_1x8_64f_16gb.cfg')
PUBLISHED_BOUNDARIES = (10000, 20000, 30000, 40000, 50000)   # I3D_Finetune, batch 6
PUBLISHED_VALUES = (1e-3, 8e-4, 5e-4, 3e-4, 1e-4, 5e-5)
UCF101_TRAIN_VIDEOS = 9537


@pytest.fixture(autouse=True)
def in_root(monkeypatch):
  monkeypatch.chdir(ROOT)  # Nested --flagfile paths are relative to the repository.


def parse(*argv):
  flag_values = flags.FlagValues()
  define_flags(TrainConfig, flag_values)
  flag_values(['train'] + list(argv))
  return config_from_flags(TrainConfig, flag_values)


def header(path):
  with open(path) as handle:
    return ''.join(line for line in handle if line.startswith('#'))


@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(CLUSTER, '*'))),
                         ids=os.path.basename)
def test_each_file_opens_with_its_command_and_what_to_expect(path):
  text = header(path).replace('\\\n#      ', '')
  relative = os.path.relpath(path, ROOT)
  command = ('kubectl apply -f ' if path.endswith('.yaml') else
             'python train_image_classifier.py --flagfile=') + relative
  assert command in text
  assert 'Expect' in text


@pytest.mark.parametrize('job_name, task_index', [('worker', 0), ('worker', 9), ('ps', 1)])
def test_the_host_list_resolves_to_ten_workers_and_two_ps(job_name, task_index):
  config = parse('--flagfile=' + NODES, '--job_name=' + job_name,
                 '--task_index=%d' % task_index)
  job = lifecycle.resolve_job(config)
  assert (job.task.num_workers, job.task.num_ps) == (10, 2)
  assert job.task.is_chief == (job_name == 'worker' and task_index == 0)
  if job_name == 'worker':
    assert job.config.worker_replicas == 10 and job.config.task == task_index


def test_the_recipe_is_synchronous_over_all_ten_at_the_single_gpu_schedule_in_epochs():
  config = lifecycle.resolve_job(parse('--flagfile=' + NODES, '--job_name=worker',
                                       '--task_index=3')).config
  single = parse('--flagfile=' + SINGLE_GPU)
  for check in (train_setup._check_positive_ints, train_setup._check_replicas,  # pylint: disable=protected-access
                train_setup._check_optimizer, train_setup._check_learning_rate):  # pylint: disable=protected-access
    check(config)
  assert config.sync_replicas and config.replicas_to_aggregate == 10
  batch = optimization.global_batch_size(config)
  assert batch == 80 and config.batch_size == single.batch_size
  epochs = [b * batch / UCF101_TRAIN_VIDEOS for b in config.learning_rate_boundaries]
  published = [b * 6 / UCF101_TRAIN_VIDEOS for b in PUBLISHED_BOUNDARIES]
  assert epochs == pytest.approx(published, rel=2e-3)
  assert config.max_number_of_steps * batch / UCF101_TRAIN_VIDEOS == pytest.approx(40, rel=1e-3)
  assert config.learning_rate_values == pytest.approx(
      [v * batch / 6 for v in PUBLISHED_VALUES], rel=1e-2)
  for name in ('model_name', 'clip_frames', 'train_image_size', 'momentum', 'weight_decay',
               'dropout_keep_prob', 'checkpoint_exclude_scopes'):
    assert getattr(config, name) == getattr(single, name), name


def test_the_tfjob_runs_the_recipe_on_ten_gpu_workers_with_exit_code_restarts():
  with open(TFJOB) as handle:
    text = handle.read()
  replicas = dict(re.findall(r'^    (PS|Chief|Worker):\n      replicas: (\d+)', text, re.M))
  assert {k: int(v) for k, v in replicas.items()} == {'PS': 2, 'Chief': 1, 'Worker': 9}
  assert re.findall(r'restartPolicy: (\w+)', text) == ['ExitCode'] * 3
  assert re.findall(r'containers:\n *- name: (\w+)', text) == ['tensorflow', 'tensorflow']
  assert text.count('--flagfile=configs/cluster/ucf101_i3d_rgb_kinetics_10x8_64f_sync.cfg') == 2
  for flag in ('--ps_hosts', '--worker_hosts', '--job_name', '--task_index', '--master'):
    assert flag not in text.split('apiVersion', 1)[1]   # TF_CONFIG comes from the operator.
  assert 'kind: NetworkPolicy' in text and 'nvidia.com/gpu: 1' in text
