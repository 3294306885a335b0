"""Every entry point's --help lists its own flags, by its config's groups, and exits 0.

The --help that comes before TensorFlow loads is asked of each such entry in a process (0.2
s each); of the entries that import TensorFlow, one answers --help and one --helpfull in a
process, and the others' --help text is built in this process as their parse_flags builds
it."""

import ast
import dataclasses
import os
import subprocess
import sys
import types

import pytest
from absl import flags

from core import flag_help
from core.params import define_flags
from demos.video import DemoConfig
from datasets.checks.verify_records import VerifyConfig
from datasets.conversion.convert_images import ImageConversion
from datasets.conversion.export_media_sequence import MediaSequenceExport
from datasets.conversion.migrate_video_records import RecordMigration
from datasets.conversion.convert_videos_config import VideoConversion
from datasets.inputs.data_service import ServerConfig
from datasets.synthetic.make_synthetic_videos import SyntheticVideosConfig
from deployment.cluster.launch_local import LaunchConfig
from deployment.cluster.preflight import PlannedJob
from evaluation.config import EvalConfig
from nets.inflation import InflateConfig
from serving.export_model import ExportConfig
from serving.predict_video import PredictConfig
from training.config import TrainConfig
from training.doctor.settings import DoctorSettings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENTRIES = [
    (['train_image_classifier.py'], TrainConfig),
    (['eval.py'], EvalConfig),
    (['export.py'], ExportConfig),
    (['predict.py'], PredictConfig),
    (['demo.py'], DemoConfig),
    (['-m', 'datasets.convert_images'], ImageConversion),
    (['-m', 'datasets.convert_videos'], VideoConversion),
    (['-m', 'datasets.make_synthetic_videos'], SyntheticVideosConfig),
    (['-m', 'datasets.verify_records'], VerifyConfig),
    (['-m', 'datasets.migrate_video_records'], RecordMigration),
    (['-m', 'datasets.export_media_sequence'], MediaSequenceExport),
    (['-m', 'datasets.data_service'], ServerConfig),
    (['-m', 'nets.inflate'], InflateConfig),
    (['-m', 'deployment.launch_local'], LaunchConfig),
    (['-m', 'training.check_cluster'], TrainConfig),   # The trainer's flags.
    (['-m', 'training.check_cluster'], PlannedJob),    # And a job's layout without addresses.
    (['-m', 'training.doctor'], DoctorSettings),
    (['-m', 'training.doctor'], TrainConfig),   # The doctor takes the trainer's flags too.
]

# Entries whose --help comes before TensorFlow loads (core.params.answer_help, or no
# TensorFlow at all): 0.2 s instead of about 3. The others' configs import it (evaluation and
# export through resolve.sampling, the tools through their modules' record code).
HELP_WITHOUT_TENSORFLOW = {'train_image_classifier.py', 'demo.py', 'training.check_cluster',
                           'training.doctor', 'datasets.convert_videos',
                           'datasets.make_synthetic_videos', 'deployment.launch_local'}
# Of the entries that import TensorFlow, one answers --help in a process of its own (a
# tool: its docstring comes first); the others' text is built in this process, as their
# parse_flags builds it (_help_in_process).
TENSORFLOW_HELP_STARTED = 'datasets.verify_records'


def _flag_names(config_class):
  return [field.name for field in dataclasses.fields(config_class)]


def _source_path(entry):
  return os.path.join(ROOT, entry[-1] if entry[-1].endswith('.py') else
                      entry[-1].replace('.', os.sep) + '.py')


def _help_started(entry):
  """The entry's --help in a fresh process; where TensorFlow must stay out, checked by
  -X importtime."""
  without_tensorflow = entry[-1] in HELP_WITHOUT_TENSORFLOW
  options = ['-X', 'importtime'] if without_tensorflow else []
  result = subprocess.run([sys.executable] + options + entry + ['--help'],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  imported = [line.rsplit('|', 1)[-1].strip() for line in result.stderr.splitlines()
              if line.startswith('import time:')]
  if without_tensorflow:
    assert imported and 'tf_compat' not in imported and 'tensorflow' not in imported, entry
  return result.stdout


def _help_in_process(entry, config_class, monkeypatch):
  """The text parse_flags prints for the entry's --help (core.flag_help.help_text), built
  here: the entry's flags (the entry defines its config's: its source says so) on flags
  of their own, under the entry's docstring as its __main__ holds it."""
  with open(_source_path(entry)) as handle:
    source = handle.read()
  assert 'define_flags(%s)' % config_class.__name__ in source, entry
  main = types.ModuleType('__main__', ast.get_docstring(ast.parse(source), clean=False))
  monkeypatch.setitem(sys.modules, '__main__', main)
  monkeypatch.setattr(sys, 'argv', [_source_path(entry)])
  flag_values = flags.FlagValues()
  define_flags(config_class, flag_values)
  labels = dict.fromkeys(flag_help.group_label(group) for group in
                         flag_help.field_groups(config_class).values())
  return flag_help.help_text('short', flag_values, list(labels))


@pytest.mark.parametrize('entry, config_class', ENTRIES,
                         ids=[entry[-1] for entry, _ in ENTRIES])
def test_help_lists_every_flag_of_the_entry_by_group(entry, config_class, monkeypatch):
  if entry[-1] in HELP_WITHOUT_TENSORFLOW | {TENSORFLOW_HELP_STARTED}:
    text = _help_started(entry)
  else:
    text = _help_in_process(entry, config_class, monkeypatch)
  for name in _flag_names(config_class):
    assert ('--%s:' % name in text or '--[no]%s:' % name in text), name
  groups = set(flag_help.field_groups(config_class).values())
  for group in groups:
    assert flag_help.group_label(group) + ':' in text, group
  assert '--helpfull' in text
  assert 'absl.logging' not in text  # Only --helpfull lists everyone's flags.
  if entry[0] == '-m':  # A tool: its docstring, the usage, comes first.
    assert 'Exit status (the table in core/errors.py)' in text or 'Exit status:' in text


@pytest.mark.parametrize('entry, config_class', ENTRIES[4:],
                         ids=[entry[-1] for entry, _ in ENTRIES[4:]])
def test_every_tool_groups_its_flags(entry, config_class):
  """Each tool's config names its groups (`# Group.` comments), so --help has them."""
  del entry
  assert len(set(flag_help.field_groups(config_class).values())) >= 2
  assert set(flag_help.field_groups(config_class)) == set(_flag_names(config_class))


def test_the_launchers_help_stops_at_the_separator():
  """--help after `--` belongs to the command the tasks run, not to the launcher."""
  result = subprocess.run([sys.executable, '-m', 'deployment.launch_local', '--num_workers=0',
                           '--', 'python', 'trainer.py', '--help'],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 2 and 'num_workers=0' in result.stderr, result.stderr


def test_helpfull_keeps_the_groups_and_adds_the_libraries_flags():
  result = subprocess.run([sys.executable, 'train_image_classifier.py', '--helpfull'],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  assert 'Optimizer flags:' in result.stdout and 'Cluster flags:' in result.stdout
  assert 'absl.logging:' in result.stdout


def test_field_groups_follow_the_group_comments():
  groups = flag_help.field_groups(TrainConfig)
  assert groups['num_clones'] == 'Deployment'
  assert groups['optimizer'] == 'Optimizer'
  assert groups['learning_rate'] == 'Learning rate'
  assert groups['ps_hosts'] == 'Cluster'
  assert set(groups) == set(_flag_names(TrainConfig))


def test_each_training_flag_is_in_the_group_of_what_it_sets():
  """--sync_replicas and --replicas_to_aggregate were listed with the learning rate."""
  groups = flag_help.field_groups(TrainConfig)
  for name in ('sync_replicas', 'replicas_to_aggregate', 'sync_trace', 'worker_hosts'):
    assert groups[name] == 'Cluster', name
  for name in ('label_smoothing', 'moving_average_decay', 'clip_gradient_norm'):
    assert groups[name] == 'Optimizer', name
  for name in ('summarize_gradients', 'summarize_activations'):
    assert groups[name] == 'Summaries', name
  learning_rate = sorted(name for name, group in groups.items() if group == 'Learning rate')
  assert learning_rate == sorted(['learning_rate_decay_type', 'learning_rate',
                                  'end_learning_rate', 'learning_rate_decay_factor',
                                  'num_epochs_per_decay', 'learning_rate_boundaries',
                                  'learning_rate_values', 'warmup_epochs'])
