"""The tool commands the README, docs, recipes, Makefile and docstrings cite still run:
each `python -m <tool>` names only flags the tool defines, and the launcher's command
after `--` is a program, not flags."""

import dataclasses
import glob
import os
import re

import pytest
from absl import flags

from core.params import define_flags
from datasets.checks.verify_records import VerifyConfig
from datasets.conversion.convert_images import ImageConversion
from datasets.conversion.export_media_sequence import MediaSequenceExport
from datasets.conversion.migrate_video_records import RecordMigration
from datasets.conversion.convert_videos_config import VideoConversion
from datasets.inputs.data_service import ServerConfig
from datasets.synthetic.make_synthetic_videos import SyntheticVideosConfig
from deployment.cluster.launch_local import LaunchConfig
from nets.inflation import InflateConfig
from training.config import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = {'datasets.convert_images': ImageConversion,
         'datasets.convert_videos': VideoConversion,
         'datasets.make_synthetic_videos': SyntheticVideosConfig,
         'datasets.verify_records': VerifyConfig,
         'datasets.migrate_video_records': RecordMigration,
         'datasets.export_media_sequence': MediaSequenceExport,
         'datasets.data_service': ServerConfig,
         'nets.inflate': InflateConfig,
         'deployment.launch_local': LaunchConfig,
         'training.check_cluster': TrainConfig}
_CITATION = re.compile(r'-m (%s)\b(.*)' % '|'.join(re.escape(t) for t in TOOLS))
_SOURCES = ('README.md', 'Makefile', 'docs/*.md', 'configs/*.cfg', 'configs/*/*',
            '*.py', 'datasets/**/*.py', 'nets/*.py', 'deployment/*.py', 'training/*.py',
            'evaluation/*.py', 'serving/*.py', 'resolve/*.py')


def _logical_lines(path):
  """Lines with shell continuations joined ('\\' or, in a docstring, '\\\\'), comment
  markers dropped."""
  with open(path) as handle:
    lines = [line.rstrip('\n').lstrip().lstrip('#').strip() for line in handle]
  joined, current = [], ''
  for line in lines:
    continued = line.endswith('\\')
    current += ' ' + line.rstrip('\\').strip()
    if not continued:
      joined.append(current.strip())
      current = ''
  return joined + [current.strip()]


def _citations():
  paths = sorted({path for pattern in _SOURCES
                  for path in glob.glob(os.path.join(ROOT, pattern), recursive=True)
                  if os.path.isfile(path)})
  for path in paths:
    for line in _logical_lines(path):
      for match in _CITATION.finditer(line):
        yield os.path.relpath(path, ROOT), match.group(1), match.group(2).split()


CITATIONS = list(_citations())


def test_the_tools_are_cited():
  assert {tool for _, tool, _ in CITATIONS} == set(TOOLS)


@pytest.mark.parametrize('path, tool, words', CITATIONS,
                         ids=['%s:%s' % (path, tool) for path, tool, _ in CITATIONS])
def test_each_cited_command_names_only_the_tools_flags(path, tool, words):
  flag_values = flags.FlagValues()
  define_flags(TOOLS[tool], flag_values)
  for word in words:
    if word == '--':
      rest = words[words.index('--') + 1:]
      assert rest and not rest[0].startswith('-'), (path, 'no program after --', words)
      break
    if not word.startswith('--'):
      break  # Prose, `...` or the end of the command.
    name = word[2:].split('=', 1)[0].rstrip('`')
    known = name in flag_values or (name.startswith('no') and name[2:] in flag_values)
    known = known or name == 'flagfile'   # absl's parser reads it for every program.
    assert known, '%s cites %s %s: not a flag of the tool' % (path, tool, word)


_TRAINER = re.compile(r'python (?:\S+/)?train_image_classifier\.py\b(.*)')
_CLUSTER = ('deployment.launch_local', '--job_name', '--ps_hosts', '--worker_hosts',
            'configs/cluster/')


def _flag_words(words):
  """The leading `--name[=value]` words of a command (prose or the end stops them)."""
  found = []
  for word in words:
    if not word.startswith('--'):
      break
    found.append(word.rstrip('`'))
  return found


def _resolved_names(words):
  """Flag names of `words` with every --flagfile that exists read in (flagfiles nest)."""
  names = []
  for word in words:
    name, _, value = word[2:].partition('=')
    names.append(name)
    if name == 'flagfile' and os.path.isfile(os.path.join(ROOT, value)):
      with open(os.path.join(ROOT, value)) as handle:
        lines = [line.strip() for line in handle]
      names += _resolved_names([line for line in lines if line.startswith('--')])
  return names


TRAINER_CITATIONS = [
    (os.path.relpath(path, ROOT), line, _flag_words(match.group(1).split()))
    for path in sorted({p for pattern in ('README.md', 'docs/*.md', 'configs/*.cfg',
                                          'configs/*/*.cfg')
                        for p in glob.glob(os.path.join(ROOT, pattern))})
    for line in _logical_lines(path) for match in _TRAINER.finditer(line)]


@pytest.mark.parametrize('path, line, words', TRAINER_CITATIONS,
                         ids=['%s:%d' % (c[0], i) for i, c in enumerate(TRAINER_CITATIONS)])
def test_each_cited_training_command_names_only_training_flags(path, line, words):
  known = {field.name for field in dataclasses.fields(TrainConfig)} | {'flagfile', 'help'}
  for name in _resolved_names(words):
    assert name in known or (name.startswith('no') and name[2:] in known), (
        '%s cites --%s: not a training flag (%s)' % (path, name, line))


def test_every_cited_cluster_command_ends():
  """A cluster's tasks stop at --max_number_of_steps; without it the README's cluster
  command ran until killed."""
  cluster = [(path, line, words) for path, line, words in TRAINER_CITATIONS
             if any(marker in line for marker in _CLUSTER)]
  assert {path for path, _, _ in cluster} >= {'README.md', 'docs/cluster.md'}
  for path, line, words in cluster:
    assert 'max_number_of_steps' in _resolved_names(words), (path, line)
