"""The verifier's work (datasets/record_check.py) on the shared synthetic records and on
digits, clean and damaged; what to expect is computed here from the records (protobuf),
manifest.json and the framing (tests/damaged_data.py)."""

import json
import os

from datasets import record_check
from datasets.record_check import VerifyConfig
from tests import damaged_data, video_testdata


def _manifest(directory):
  with open(os.path.join(directory, 'manifest.json')) as handle:
    return json.load(handle)


def test_clean_records_verify(tmp_path_factory):
  directory = video_testdata.converted(tmp_path_factory, 'rgb')
  result = record_check.verify_dataset(VerifyConfig(dataset_dir=directory,
                                                    num_parallel_calls=2))
  contents = _manifest(directory)['shard_contents']
  assert not result.damaged and not result.missing
  assert sorted(os.path.basename(s.path) for s in result.shards) == sorted(contents)
  assert sum(s.frames for s in result.shards) == sum(
      v['frames'] for shard in contents.values() for v in shard['videos'])
  assert record_check.report_lines(result)[-1].endswith('every record reads and decodes')


def test_a_shard_cut_between_records_is_short_of_its_videos(tmp_path_factory, tmp_path):
  """TensorFlow reads such a shard without an error: only the count shows it."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  path = os.path.join(directory, 'test-00001-of-00002')
  offsets = damaged_data.record_offsets(path)
  damaged_data.truncate(path, offsets[-1][0])
  result = record_check.verify_dataset(VerifyConfig(dataset_dir=directory, splits=('test',),
                                                    decode=False))
  [shard] = result.damaged
  assert shard.path == path and shard.problems == [
      'holds %d readable records, the conversion wrote %d' % (len(offsets) - 1, len(offsets))]


def test_damaged_images_get_the_image_conversion_command(digits_dir, tmp_path):
  directory = damaged_data.copy_dataset(digits_dir, tmp_path / 'digits')
  broken = os.path.join(directory, 'test-00001-of-00004')
  flipped = os.path.join(directory, 'test-00003-of-00004')
  damaged_data.break_image(broken, 7)
  offset, _ = damaged_data.record_offsets(flipped)[2]
  damaged_data.flip_byte(flipped, offset + 12 + 3)
  result = record_check.verify_dataset(VerifyConfig(dataset_dir=directory, splits=('test',),
                                                    num_parallel_calls=2))
  command = ('python -m datasets.convert_images --dataset_name=digits --num_shards=4 '
             '--output_dir=%s' % directory)
  assert record_check.report_lines(result) == [
      'damaged: %s: record 7: the image does not decode' % broken,
      '  rebuild: %s' % command,
      'damaged: %s: corrupted: record 2 at byte %d fails its data CRC; holds 89 readable '
      'records, the conversion wrote 90' % (flipped, offset),
      '  rebuild: %s' % command,
      'checked 4 shards of %s: 359 images, 359 frames; 2 damaged or missing (above)'
      % directory]
