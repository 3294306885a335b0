"""Every recipe in configs/: it parses into a TrainConfig whose rules hold, opens with the
command that runs it and what to expect, and the fine-tuning recipes follow I3D_Finetune's
schedule in epochs (boundaries and learning rates scaled with the batch); the 6 GB ones
reach its batch of 6 by accumulating micro-batches, with batch norm frozen. Recipes compose:
what two of them share is a base in configs/base/ they include (`--flagfile` nests), so no
two files repeat more than a few flag lines."""

import glob
import os
import re

import pytest

from nets import nets_factory
from training.config import TrainConfig
from core.params import config_from_argv
from deployment.session.gpu_options import check_gpu_options
from training import optimizer_checks
from training import setup as train_setup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_RECIPES = sorted(path for path in glob.glob(os.path.join(ROOT, 'configs', '*.cfg')))
# Every flagfile a recipe may include or be: the recipes, the cluster's and the bases.
FLAGFILES = sorted(glob.glob(os.path.join(ROOT, 'configs', '*.cfg'))
                   + glob.glob(os.path.join(ROOT, 'configs', '*', '*.cfg')))
# Flag lines two files may both hold (a recipe overriding its base's value is no repeat).
SHARED_LINES_AT_MOST = 4
FINE_TUNING = [path for path in TRAIN_RECIPES if '_kinetics_' in path]
# I3D_Finetune (UCF101, batch 6): piecewise learning rate at these global steps.
PUBLISHED_BOUNDARIES = (10000, 20000, 30000, 40000, 50000)
PUBLISHED_VALUES = (1e-3, 8e-4, 5e-4, 3e-4, 1e-4, 5e-5)
TRAIN_VIDEOS = {'ucf101': 9537, 'hmdb51': 3570}   # split 1


def parse(path):
  return config_from_argv(TrainConfig, ['--flagfile=' + path])[0]


def test_recipes_exist():
  names = {os.path.basename(path) for path in FINE_TUNING}
  for dataset in ('ucf101', 'hmdb51'):
    for modality in ('rgb', 'flow'):
      assert sum(name.startswith('%s_i3d_%s_' % (dataset, modality)) for name in names) == 2


@pytest.mark.parametrize('path', TRAIN_RECIPES, ids=os.path.basename)
def test_recipe_parses_and_passes_the_rules_that_need_no_data(path):
  config = parse(path)
  train_setup._check_positive_ints(config)  # pylint: disable=protected-access
  optimizer_checks.check_optimizer(config)
  check_gpu_options(config)
  optimizer_checks.check_learning_rate(config)
  train_setup._check_freeze_batch_norm(  # pylint: disable=protected-access
      config, nets_factory.get_network_spec(config.model_name))
  with open(path) as handle:
    header = [line for line in handle if line.startswith('#')]
  text = ''.join(header)
  assert 'python train_image_classifier.py --flagfile=configs/%s' % os.path.basename(path) \
      in text.replace('\\\n#      ', '')
  assert re.search(r'Expect', text)


@pytest.mark.parametrize('path', FINE_TUNING, ids=os.path.basename)
def test_fine_tuning_follows_the_published_schedule_in_epochs(path):
  config = parse(path)
  dataset = os.path.basename(path).split('_')[0]
  assert config.dataset_name == dataset and config.model_name == 'i3d'
  assert config.clip_frames == 64 and config.train_image_size == 224
  assert config.momentum == 0.9 and config.dropout_keep_prob == 0.36
  assert config.weight_decay == 7e-7
  assert config.checkpoint_exclude_scopes == ('InceptionV1/Logits',)
  batch = config.batch_size * config.num_clones * config.num_micro_batches
  epochs_of = lambda steps, videos: steps * batch / videos
  published_epochs = [b * 6 / TRAIN_VIDEOS['ucf101'] for b in PUBLISHED_BOUNDARIES]
  epochs = [epochs_of(b, TRAIN_VIDEOS[dataset]) for b in config.learning_rate_boundaries]
  assert epochs == pytest.approx(published_epochs, rel=1e-3)
  assert epochs_of(config.max_number_of_steps, TRAIN_VIDEOS[dataset]) == pytest.approx(
      40, rel=1e-3)
  assert config.learning_rate_values == pytest.approx(
      [v * batch / 6 for v in PUBLISHED_VALUES], rel=1e-2)
  assert config.learning_rate == config.learning_rate_values[0]


@pytest.mark.parametrize('path', [p for p in FINE_TUNING if p.endswith('_6gb.cfg')],
                         ids=os.path.basename)
def test_small_gpu_recipes_reach_the_published_batch_with_frozen_batch_norm(path):
  config = parse(path)
  assert (config.batch_size, config.num_micro_batches, config.num_clones) == (3, 2, 1)
  assert config.learning_rate_values == pytest.approx(PUBLISHED_VALUES)
  assert config.freeze_batch_norm == 'all'


@pytest.mark.parametrize('path', [p for p in FINE_TUNING if p.endswith('_16gb.cfg')],
                         ids=os.path.basename)
def test_the_16gb_recipes_compute_in_float16_with_loss_scaling(path):
  config = parse(path)
  assert config.mixed_precision == 'float16'
  assert (config.loss_scale, config.loss_scale_growth_steps) == (2.0 ** 15, 2000)


def _flag_lines(path):
  with open(path) as handle:
    return [line.strip() for line in handle if line.startswith('--')]


@pytest.mark.parametrize('path', FLAGFILES, ids=os.path.basename)
def test_an_included_flagfile_is_named_from_the_repository_root_and_exists(path):
  # absl opens a nested --flagfile from the current directory: the recipes' commands run
  # from the repository root, so a base is named as configs/base/NAME.cfg.
  for line in _flag_lines(path):
    if line.startswith('--flagfile='):
      included = line.split('=', 1)[1]
      assert included.startswith('configs/') and os.path.isfile(
          os.path.join(ROOT, included)), (path, included)


def test_no_two_flagfiles_repeat_more_than_a_few_flag_lines():
  lines = {os.path.relpath(path, ROOT): set(_flag_lines(path)) - {''}
           for path in FLAGFILES}
  repeats = ['%s and %s share %d: %s' % (a, b, len(lines[a] & lines[b]),
                                        sorted(lines[a] & lines[b]))
             for a in lines for b in lines
             if a < b and len(lines[a] & lines[b]) > SHARED_LINES_AT_MOST]
  assert not repeats, '\n'.join(repeats)


@pytest.mark.parametrize('path', [p for p in FINE_TUNING if '_rgb_' in p],
                         ids=os.path.basename)
def test_the_rgb_and_flow_recipes_of_a_dataset_and_size_resolve_alike(path):
  # The modality is the data's (its records) and the checkpoint's (the command's
  # --checkpoint_path): the training flags are the same, from one base.
  flow = path.replace('_rgb_', '_flow_')
  assert parse(path) == parse(flow)
  assert _flag_lines(path) == _flag_lines(flow) and len(_flag_lines(path)) == 1


@pytest.mark.parametrize('path', FINE_TUNING, ids=os.path.basename)
def test_a_recipe_resolves_to_its_names_dataset_and_gpu_size(path):
  config = parse(path)
  name = os.path.basename(path)
  assert config.dataset_name == name.split('_')[0]
  per_step = {'1x3_64f_6gb.cfg': (3, 2, 'float32'), '1x8_64f_16gb.cfg': (8, 1, 'float16')}
  size = next(key for key in per_step if name.endswith(key))
  assert (config.batch_size, config.num_micro_batches,
          config.mixed_precision) == per_step[size]
