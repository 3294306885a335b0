"""The tool commands the README, docs, recipes, Makefile and docstrings cite still run:
each `python -m <tool>` names only flags the tool defines, and the launcher's command
after `--` is a program, not flags."""

import glob
import os
import re

import pytest
from absl import flags

from core.params import define_flags
from datasets.conversion.image_conversion import ImageConversion
from datasets.conversion.media_sequence_export import MediaSequenceExport
from datasets.conversion.record_migration import RecordMigration
from datasets.conversion.video_conversion_config import VideoConversion
from datasets.record_check import VerifyConfig
from datasets.synthetic.motion_videos import SyntheticVideosConfig
from deployment.local_cluster import LaunchConfig
from nets.inflation import InflateConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = {'datasets.convert_images': ImageConversion,
         'datasets.convert_videos': VideoConversion,
         'datasets.make_synthetic_videos': SyntheticVideosConfig,
         'datasets.verify_records': VerifyConfig,
         'datasets.migrate_video_records': RecordMigration,
         'datasets.export_media_sequence': MediaSequenceExport,
         'nets.inflate': InflateConfig,
         'deployment.launch_local': LaunchConfig}
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
    assert known, '%s cites %s %s: not a flag of the tool' % (path, tool, word)
