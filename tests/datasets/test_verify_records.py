"""`python -m datasets.verify_records` as a user runs it, on a copy of the shared synthetic
records (chunked, with an index per shard) with a shard cut short, one byte flipped, two
frames that do not decode and a shard gone: each damaged shard listed with what is wrong
(the framing, the chunks its index lists that cannot be read there) and the command that
rebuilds it, status 3. What to expect is computed here from the framing, the index and
the records (tests/damaged_data.py). The damaged dataset is checked in this process as the
tool's main checks it; the tool itself runs once, on a sound dataset (its one line)."""

import os
import re
import subprocess
import sys

import pytest

from core import errors
from datasets.checks import verify_records
from datasets.checks.verify_records import VerifyConfig
from tests import damaged_data, entries, video_testdata
from tests.test_tf_compat import quiet_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_damaged_shards_are_listed_with_their_rebuild_commands(tmp_path_factory, tmp_path,
                                                               capsys):
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = lambda name: os.path.join(directory, name)
  cut = shard('train-00001-of-00002')
  cut_records = damaged_data.record_offsets(cut)
  second, second_length = cut_records[1]
  cut_video = next(v for v, (_, _, bounds) in enumerate(damaged_data.index_entries(cut))
                   if second in bounds[:-1])
  cut_chunk = damaged_data.index_entries(cut)[cut_video][2].index(second)
  cut_expected = _no_record_there(cut, cut_video, cut_chunk)
  size = damaged_data.truncate(cut, second + 100)
  broken = shard('test-00000-of-00002')
  video = damaged_data.break_frames(broken, 1, [2, 4])
  first_chunk = len(damaged_data.index_entries(broken)[0][1]) - 1
  last_chunk = first_chunk + len(damaged_data.index_entries(broken)[1][1]) - 2
  flipped = shard('test-00001-of-00002')
  flipped_expected = _no_record_there(flipped, 0, 0)
  damaged_data.flip_byte(flipped, 12 + 40)
  os.remove(shard('train-00000-of-00002'))
  # The command line in this process, as the tool's main runs it (tests/entries.py).
  status, result = entries.call(VerifyConfig, ['--dataset_dir=%s' % directory],
                                   verify_records.verify_dataset)
  assert status == errors.OK and (result.damaged or result.missing)  # main: DATA (3)
  for line in verify_records.report_lines(result):   # what main prints
    print(line)
  lines = capsys.readouterr().out.splitlines()
  rebuild = '  rebuild: python -m datasets.convert_videos --output_dir=%s --only_shard=%%s' % (
      directory)
  frames = damaged_data.num_frames(broken, 1)
  records = ('record %d' % first_chunk if first_chunk == last_chunk else
             'records %d..%d' % (first_chunk, last_chunk))
  assert lines == [
      'damaged: %s: %s (video %s): frames 2, 4 of %d do not decode'
      % (broken, records, video, frames),
      rebuild % 'test-00000-of-00002',
      'damaged: %s: corrupted: record 0 at byte 0 fails its data CRC; %s'
      % (flipped, flipped_expected),
      rebuild % 'test-00001-of-00002',
      'damaged: %s: truncated: record 1 at byte %d needs %d bytes, the file ends after 100 '
      '(%d bytes short: a partial copy?); %s'
      % (cut, second, second_length + 16, second + second_length + 16 - size, cut_expected),
      rebuild % 'train-00001-of-00002',
      'missing: %s' % shard('train-00000-of-00002'),
      rebuild % 'train-00000-of-00002',
      lines[-1]]
  assert lines[-1].endswith('4 damaged or missing (above)')


def _no_record_there(path, video, chunk):
  """The verifier's phrase for chunk number `chunk` of video number `video` of `path`,
  which the index lists but the shard does not hold (readable)."""
  video_id, frames, bounds = damaged_data.index_entries(path)[video]
  return ('its index lists frames %d..%d of video %s at bytes %d..%d, where the shard holds '
          'no readable record starting there' % (frames[chunk], frames[chunk + 1] - 1,
                                                  video_id, bounds[chunk], bounds[chunk + 1]))


def test_the_summary_is_the_last_line_and_tensorflow_adds_none(digits_dir):
  """The tool's contract, in its own process. TensorFlow's start-up notices (absl::InitializeLog, oneDNN, CPU features) were
  reported after the summary: stdout and stderr together, the summary is the last line
  and the only one, and stderr is empty (the user's environment without the variables
  that would hide or add TensorFlow's notices)."""
  argv = [sys.executable, '-m', 'datasets.verify_records', '--dataset_dir=%s' % digits_dir,
          '--splits=test']
  together = subprocess.run(argv, cwd=ROOT, env=quiet_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=300)
  assert together.returncode == errors.OK, together.stdout
  lines = together.stdout.splitlines()
  assert len(lines) == 1 and re.fullmatch(
      r'checked \d+ shards of %s: (\d+) images, \1 frames; every record reads and decodes'
      % re.escape(digits_dir), lines[0]), together.stdout
