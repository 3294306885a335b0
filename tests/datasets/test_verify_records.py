"""`python -m datasets.verify_records` as a user runs it, on a copy of the shared synthetic
records with a shard cut in half, one byte flipped, two frames that do not decode and a
shard gone: each damaged shard listed with the command that rebuilds it, status 3. What
to expect is computed here from the framing and the records (tests/damaged_data.py)."""

import os
import subprocess
import sys

import pytest

from core import errors
from tests import damaged_data, video_testdata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_damaged_shards_are_listed_with_their_rebuild_commands(tmp_path_factory, tmp_path):
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = lambda name: os.path.join(directory, name)
  cut = shard('train-00001-of-00002')
  cut_records = damaged_data.record_offsets(cut)
  second, second_length = cut_records[1]
  size = damaged_data.truncate(cut, second + 100)
  video = damaged_data.break_frames(shard('test-00000-of-00002'), 1, [2, 4])
  flipped = shard('test-00001-of-00002')
  flipped_records = damaged_data.record_offsets(flipped)
  damaged_data.flip_byte(flipped, flipped_records[0][0] + 12 + 40)
  os.remove(shard('train-00000-of-00002'))
  result = subprocess.run([sys.executable, '-m', 'datasets.verify_records',
                           '--dataset_dir=%s' % directory], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                          text=True, timeout=300)
  assert result.returncode == errors.DATA, result.stderr
  rebuild = '  rebuild: python -m datasets.convert_videos --output_dir=%s --only_shard=%%s' % (
      directory)
  frames = damaged_data.num_frames(shard('test-00000-of-00002'), 1)
  assert result.stdout.splitlines() == [
      'damaged: %s: record 1 (video %s): frames 2, 4 of %d do not decode'
      % (shard('test-00000-of-00002'), video, frames),
      rebuild % 'test-00000-of-00002',
      'damaged: %s: corrupted: record 0 at byte 0 fails its data CRC; holds %d readable '
      'records, the conversion wrote %d' % (flipped, len(flipped_records) - 1,
                                            len(flipped_records)),
      rebuild % 'test-00001-of-00002',
      'damaged: %s: truncated: record 1 at byte %d needs %d bytes, the file ends after 100 '
      '(%d bytes short: a partial copy?); holds 1 readable records, the conversion wrote %d'
      % (cut, second, second_length + 16, second + second_length + 16 - size,
         len(cut_records)),
      rebuild % 'train-00001-of-00002',
      'missing: %s' % shard('train-00000-of-00002'),
      rebuild % 'train-00000-of-00002',
      result.stdout.splitlines()[-1]]
  assert result.stdout.splitlines()[-1].endswith('4 damaged or missing (above)')
