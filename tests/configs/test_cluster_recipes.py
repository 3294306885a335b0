"""configs/cluster/: the ten-node recipe, its host list and its Kubeflow TFJob manifest
agree with each other, parse, resolve into the cluster they describe, and keep the
single-GPU recipe's schedule in epochs at the global batch; its all-reduce variant (no ps)
is the same run with replicated variables, which the trainer's own checks accept for the
ten workers of a planned Slurm step (train.sbatch 0)."""

import glob
import os
import re

import dataclasses
import io

import pytest
from PIL import Image

from datasets.conversion import video_shards
from datasets.formats import converted_data, video_records
from deployment.cluster import preflight
from deployment.session.gpu_options import check_gpu_options
from training import lifecycle, optimization, optimizer_checks
from training import setup as train_setup
from training.config import TrainConfig
from core.params import config_from_argv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, 'configs', 'cluster')
RECIPE = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync.cfg')
NODES = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync_10nodes.cfg')
TFJOB = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_sync_tfjob.yaml')
ALLREDUCE = os.path.join(CLUSTER, 'ucf101_i3d_rgb_kinetics_10x8_64f_allreduce.cfg')
SINGLE_GPU = os.path.join(ROOT, 'configs', 'ucf101_i3d_rgb_kinetics_1x8_64f_16gb.cfg')
PUBLISHED_BOUNDARIES = (10000, 20000, 30000, 40000, 50000)   # I3D_Finetune, batch 6
PUBLISHED_VALUES = (1e-3, 8e-4, 5e-4, 3e-4, 1e-4, 5e-5)
UCF101_TRAIN_VIDEOS = 9537


@pytest.fixture(autouse=True)
def in_root(monkeypatch):
  monkeypatch.chdir(ROOT)  # Nested --flagfile paths are relative to the repository.


def parse(*argv):
  return config_from_argv(TrainConfig, argv)[0]


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
                optimizer_checks.check_optimizer, check_gpu_options,
                optimizer_checks.check_learning_rate):
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


def test_the_allreduce_recipe_is_the_sync_one_with_replicated_variables_and_no_ps():
  allreduce, sync = parse('--flagfile=' + ALLREDUCE), parse('--flagfile=' + RECIPE)
  assert (allreduce.variable_update, allreduce.num_ps_tasks, allreduce.sync_replicas) == (
      'replicated', 0, False)
  assert dataclasses.replace(allreduce, variable_update=sync.variable_update,
                             sync_replicas=True) == sync   # All else: the same run.
  with open(ALLREDUCE) as handle:   # It includes the sync recipe and says what differs.
    lines = [line.strip() for line in handle if line.startswith('--')]
  assert lines[0] == '--flagfile=' + os.path.relpath(RECIPE, ROOT) and len(lines) == 4


def _tiny_ucf101(directory, num_shards):
  """A converted UCF101 split as the trainer's checks read it: the 101 classes, one
  one-frame video in each of `num_shards` train shards with their indexes (the
  converter's own shard writer)."""
  buffer = io.BytesIO()
  Image.new('RGB', (8, 8)).save(buffer, format='JPEG')
  for index in range(num_shards):
    header = video_records.VideoHeader(
        modality='rgb', label=index, label_string='c%d' % index, video_id='v%d' % index,
        data_path='c%d/v%d.avi' % (index, index), height=8, width=8, frame_rate=25.0)
    video = video_shards.chunk_video([buffer.getvalue()], header, chunk_frames=8)
    video_shards.write_video_shard([video], str(directory), 'train', index, num_shards)
  converted_data.write_converted_info(str(directory), 'ucf101',
                                      ['c%d' % i for i in range(101)], 3,
                                      {'train': num_shards}, modality='rgb')
  return str(directory)


def test_the_trainers_checks_accept_the_allreduce_recipe_on_ten_slurm_workers(tmp_path):
  """Each task of `sbatch --ntasks=10 train.sbatch 0 --flagfile=<recipe>` (the script adds
  --addressing=slurm --num_ps_tasks=0, preflight the step's environment) is a worker of
  10 without ps, and training.setup's checks pass for the chief and the last worker."""
  planned = preflight.PlannedJob(slurm_ntasks=10, slurm_nodelist='node[0-9]')
  data = _tiny_ucf101(tmp_path / 'data', 10)
  for task in (0, 9):
    environ = dict(preflight.slurm_step_environ(planned, 0), SLURM_PROCID=str(task))
    config = parse('--flagfile=' + ALLREDUCE, '--addressing=slurm', '--num_ps_tasks=0',
                   '--dataset_dir=' + data, '--train_dir=' + str(tmp_path / 'train'))
    job = lifecycle.resolve_job(config, environ)
    assert (job.task.num_workers, job.task.num_ps, job.task.task_index) == (10, 0, task)
    checked = train_setup.check_train_config(job.config)
    assert checked.deploy_config.variable_update == 'replicated'
    assert (checked.config.worker_replicas, checked.config.num_ps_tasks) == (10, 0)


def test_the_allreduce_recipe_warms_up_the_sync_recipes_epochs():
  """The all-reduce averages the ten workers' gradients: one step is 80 examples, as a
  synchronous step over 2 ps is, and the warm-up in epochs is as many steps."""
  def resolved(path, num_ps):   # Worker 0 of train.sbatch P on ten nodes.
    planned = preflight.PlannedJob(slurm_ntasks=num_ps + 10, slurm_nodelist='node[0-9]')
    config = parse('--flagfile=' + path, '--addressing=slurm', '--num_ps_tasks=%d' % num_ps)
    return lifecycle.resolve_job(config, preflight.slurm_step_environ(planned, num_ps)).config
  sync, allreduce = resolved(RECIPE, 2), resolved(ALLREDUCE, 0)
  assert optimization.global_batch_size(sync) == 80
  assert optimization.warmup_steps(allreduce, UCF101_TRAIN_VIDEOS) == (
      optimization.warmup_steps(sync, UCF101_TRAIN_VIDEOS))
  assert optimization.global_batch_size(allreduce) == 80
