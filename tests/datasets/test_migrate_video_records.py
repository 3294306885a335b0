"""`python -m datasets.migrate_video_records` as a user meets it: eval.py refuses format-1
records in one line (status 3) naming a command; that very command migrates them.

eval.py's command line runs in this process as its main runs it; the command it names is
run as the user runs it, in a process of its own (the tool's contract: status and summary)."""

import os
import re
import shlex
import subprocess
import sys

from core import errors
from core.params import config_from_argv
from datasets import dataset_factory
from evaluation import run
from evaluation.config import EvalConfig
from evaluation.setup import from_run_records
from tests import video_testdata as vt
from tests.evaluation.placeholder_checkpoint import placeholder_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args):
  return subprocess.run([sys.executable] + args, cwd=ROOT, capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)


def _evaluate(argv):
  """eval.py's main on `argv`, in this process, up to its status on an expected error."""
  try:
    config, settings = from_run_records(*config_from_argv(EvalConfig, argv))
    list(run.evaluations(config, settings))
  except errors.EXPECTED as error:
    return errors.report(error)
  return errors.OK


def test_eval_names_the_command_that_migrates_old_records_and_it_does(tmp_path, capsys):
  old = str(tmp_path / 'ucf_rgb')
  frames = vt.write_format1_dataset(old)
  # A checkpoint that exists: eval.py checks the checkpoint path first.
  checkpoint = placeholder_checkpoint(tmp_path)
  status = _evaluate(['--dataset_name=video_folder', '--dataset_dir=%s' % old,
                      '--dataset_split_name=test', '--model_name=i3d',
                      '--checkpoint_path=%s' % checkpoint])
  refused = capsys.readouterr().err
  assert status == errors.DATA, refused
  lines = refused.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: %s' % old), refused
  command = re.search(r'migrate them with: (python -m \S+ .*)$', lines[0]).group(1)
  assert command == ('python -m datasets.migrate_video_records --dataset_dir=%s '
                     '--output_dir=%s_v2' % (old, old))
  migrated = _run(shlex.split(command)[1:])
  assert migrated.returncode == 0, migrated.stderr
  assert migrated.stdout.startswith('migrated test 2, train 3 videos into %s_v2' % old)
  for split in ('train', 'test'):
    assert dataset_factory.get_dataset('video_folder', split, old + '_v2').num_samples == (
        3 if split == 'train' else 2)
    for video_id, example in vt.whole_videos(old + '_v2', split).items():
      assert [f.bytes_list.value[0] for f in
              example.feature_lists.feature_list['image/encoded'].feature] == frames[video_id]
