"""The verifier's work (datasets/checks/verify_records.py) on the shared synthetic records and on
digits, clean and damaged; what to expect is computed here from the records (protobuf),
manifest.json and the framing (tests/damaged_data.py)."""

import json
import os

from datasets.checks import verify_records
from datasets.checks.verify_records import VerifyConfig
from tests import damaged_data, video_testdata
from tf_compat import tf


def _manifest(directory):
  with open(os.path.join(directory, 'manifest.json')) as handle:
    return json.load(handle)


def test_clean_records_verify(tmp_path_factory):
  directory = video_testdata.converted(tmp_path_factory, 'rgb')
  result = verify_records.verify_dataset(VerifyConfig(dataset_dir=directory,
                                                    num_parallel_calls=2))
  contents = _manifest(directory)['shard_contents']
  assert not result.damaged and not result.missing
  assert sorted(os.path.basename(s.path) for s in result.shards) == sorted(contents)
  assert sum(s.frames for s in result.shards) == sum(
      v['frames'] for shard in contents.values() for v in shard['videos'])
  assert verify_records.report_lines(result)[-1].endswith('every record reads and decodes')


def _no_record_there(path, video, chunk):
  """The verifier's phrase for chunk number `chunk` of video number `video` of `path`,
  which the index lists but the shard does not hold."""
  video_id, frames, bounds = damaged_data.index_entries(path)[video]
  return ('its index lists frames %d..%d of video %s at bytes %d..%d, where the shard holds '
          'no readable record starting there' % (frames[chunk], frames[chunk + 1] - 1,
                                                  video_id, bounds[chunk], bounds[chunk + 1]))


def test_a_shard_or_index_cut_between_records_is_found(tmp_path_factory, tmp_path):
  """TensorFlow reads such a file without an error: the index and the count show it."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  cut_shard = os.path.join(directory, 'test-00001-of-00002')
  entries = damaged_data.index_entries(cut_shard)
  damaged_data.truncate(cut_shard, damaged_data.record_offsets(cut_shard)[-1][0])
  cut_index = os.path.join(directory, 'test-00000-of-00002')
  videos = len(damaged_data.index_entries(cut_index))
  index_records = damaged_data.record_offsets(cut_index + '.index')
  damaged_data.truncate(cut_index + '.index', index_records[-1][0])
  result = verify_records.verify_dataset(VerifyConfig(dataset_dir=directory, splits=('test',),
                                                    decode=False))
  problems = {shard.path: shard.problems for shard in result.damaged}
  assert problems == {
      cut_shard: [_no_record_there(cut_shard, len(entries) - 1, len(entries[-1][1]) - 2)],
      cut_index: ['its index lists %d of its %d bytes: it holds records the index does not '
                  'list' % (damaged_data.index_entries(cut_index)[-1][2][-1],
                            os.path.getsize(cut_index)),
                  'holds %d readable videos, the conversion wrote %d' % (videos - 1, videos)]}


def test_damaged_images_get_the_image_conversion_command(digits_dir, tmp_path):
  directory = damaged_data.copy_dataset(digits_dir, tmp_path / 'digits')
  broken = os.path.join(directory, 'test-00001-of-00004')
  flipped = os.path.join(directory, 'test-00003-of-00004')
  damaged_data.break_image(broken, 7)
  offset, _ = damaged_data.record_offsets(flipped)[2]
  damaged_data.flip_byte(flipped, offset + 12 + 3)
  result = verify_records.verify_dataset(VerifyConfig(dataset_dir=directory, splits=('test',),
                                                    num_parallel_calls=2))
  command = ('python -m datasets.convert_images --dataset_name=digits --num_shards=4 '
             '--output_dir=%s' % directory)
  assert verify_records.report_lines(result) == [
      'damaged: %s: record 7: the image does not decode' % broken,
      '  rebuild: %s' % command,
      'damaged: %s: corrupted: record 2 at byte %d fails its data CRC; holds 89 readable '
      'records, the conversion wrote 90' % (flipped, offset),
      '  rebuild: %s' % command,
      'checked 4 shards of %s: 359 images, 359 frames; 2 damaged or missing (above)'
      % directory]


def test_format_1_records_parse_as_whole_videos(tmp_path):
  """A dataset from before chunks (no format_version): every record is one whole video,
  its frames numbered from 0."""
  directory = str(tmp_path / 'old')
  frames = video_testdata.write_format1_dataset(directory)
  with open(os.path.join(directory, 'dataset_info.json')) as handle:
    parse, _, _ = verify_records.record_parser(json.load(handle))
  seen = {}
  for name in sorted(os.listdir(directory)):
    if name.startswith(('train-', 'test-')):
      for record in tf.compat.v1.io.tf_record_iterator(os.path.join(directory, name)):
        parsed = parse(record)
        assert parsed.name == 'video %s' % parsed.id and parsed.first_frame == 0
        assert [number for number, _ in parsed.frames] == list(range(len(parsed.frames)))
        seen[parsed.id] = [groups[0] for _, groups in parsed.frames]
  assert seen == frames
