"""datasets/inputs/clip_reader.py: a clip reads the chunks holding its frames and nothing
else, whatever the video's length.

The chunks and runs are checked against a NumPy computation; the frames against the list
they were written from; the bytes read against the index's byte bounds and against the
frames' sizes, as /proc/self/io `rchar` counts them (every byte this process asked the
kernel to read, whether the page cache had it or not).
"""

import io

import numpy as np
import pytest
from PIL import Image

from datasets.conversion import video_shards
from datasets.formats import damaged_shards, dataset_split, shards, video_records
from datasets.inputs import clip_input, clip_reader
from datasets.inputs.input_settings import InputSettings
from tf_compat import tf

CHUNK = 8
LONG = 300          # frames of the long video
CLIP = 64


def _rchar():
  with open('/proc/self/io') as handle:
    return next(int(line.split()[1]) for line in handle if line.startswith('rchar:'))


def _noise_jpeg(seed, size=32):
  """An incompressible frame: every JPEG about the same size."""
  pixels = np.random.RandomState(seed).randint(0, 256, (size, size, 3)).astype(np.uint8)
  buffer = io.BytesIO()
  Image.fromarray(pixels).save(buffer, format='JPEG', quality=90)
  return buffer.getvalue()


@pytest.fixture(scope='module')
def long_video(tmp_path_factory):
  """A shard holding a short video, a 300-frame one and another short one."""
  directory = str(tmp_path_factory.mktemp('long_video'))
  frames = {'short1': [_noise_jpeg(1000 + i) for i in range(5)],
            'long': [_noise_jpeg(i) for i in range(LONG)],
            'short2': [_noise_jpeg(2000 + i) for i in range(70)]}
  headers = [video_records.VideoHeader(modality='rgb', label=i, label_string='c', video_id=v,
                                       data_path=v, height=32, width=32, frame_rate=25.0)
             for i, v in enumerate(frames)]
  videos = [video_shards.chunk_video(frames[h.video_id], h, CHUNK) for h in headers]
  shard = video_shards.write_video_shard(videos, directory, 'train', 0, 1)
  entries = {entry['video_id']: entry for entry, _ in video_shards.read_video_shard(shard)}
  return directory, shard, frames, entries


def _serialized_entry(entry):
  return video_records.index_entry(entry['video_id'], entry['label'], entry['frame_bounds'],
                                   entry['byte_bounds'])


@pytest.mark.parametrize('indices', [[0], [7, 8], [299, 0, 1], list(range(40, 104)),
                                     [5, 5, 5, 200, 9], [[3, 4], [250, 251]]])
def test_chunk_runs_match_numpy(indices):
  bounds = np.array([0] + list(range(CHUNK, LONG, CHUNK)) + [LONG])
  flat = np.array(indices).reshape(-1)
  chunk_of = np.searchsorted(bounds, flat, side='right') - 1
  needed = sorted(set(chunk_of.tolist()))
  runs = []
  for chunk in needed:
    if runs and runs[-1][0] + runs[-1][1] == chunk:
      runs[-1][1] += 1
    else:
      runs.append([chunk, 1])
  with tf.Graph().as_default(), tf.Session() as sess:
    got = sess.run(clip_reader.chunk_runs(tf.constant(bounds, tf.int64),
                                          tf.constant(flat, tf.int32)))
  assert got[0].tolist() == needed and got[1].tolist() == chunk_of.tolist()
  assert [list(r) for r in zip(got[2].tolist(), got[3].tolist())] == runs


def test_frames_read_are_the_chosen_ones_and_only_their_chunks_are_read(long_video):
  _, shard, frames, entries = long_video
  entry = entries['long']
  with tf.Graph().as_default(), tf.Session() as sess:
    indices = tf.placeholder(tf.int32, [CLIP])
    video = video_records.parse_index_entry(tf.constant(_serialized_entry(entry)))
    read, local = clip_reader.read_frames(tf.constant(shard), video, indices, 'rgb')
    chosen = tf.gather(read, local)
    sess.run(chosen, {indices: np.arange(CLIP)})   # Warm-up: nothing left to load.
    for start in (0, 3, 100, 251, 290):   # 251 and 290 wrap around the end
      clip = (start + np.arange(CLIP)) % LONG
      before = _rchar()
      got = sess.run(chosen, {indices: clip})
      read_bytes = _rchar() - before   # with the ~100 bytes of reading /proc/self/io
      assert list(got) == [frames['long'][i] for i in clip]
      chunks = sorted(set(clip // CHUNK))
      expected = sum(entry['byte_bounds'][c + 1] - entry['byte_bounds'][c] for c in chunks)
      assert expected <= read_bytes <= expected + 1024, (start, read_bytes, expected)
      chosen_bytes = sum(len(frames['long'][i]) for i in clip)
      assert read_bytes <= 1.5 * chosen_bytes   # the frames of one chunk at each end
      assert read_bytes < 0.3 * entry['byte_bounds'][-1]


def test_a_damaged_index_is_caught_by_the_check_on_the_chunks(long_video, tmp_path):
  _, shard, _, entries = long_video
  wrong = dict(entries['long'], frame_bounds=[b + 1 for b in entries['long']['frame_bounds']])
  wrong['frame_bounds'][0] = 0
  with tf.Graph().as_default(), tf.Session() as sess:
    video = video_records.parse_index_entry(tf.constant(_serialized_entry(wrong)))
    read, _ = clip_reader.read_frames(tf.constant(shard), video, tf.range(20, 30), 'rgb')
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
      sess.run(read)
  # Frames 20..29 are in chunks 2 and 3 by the wrong bounds: their bytes are named.
  bounds = entries['long']['byte_bounds']
  assert 'damaged records (unindexed): bytes %d..%d of %s for video long' % (
      bounds[2], bounds[4], shard) in str(raised.value)
  message = str(damaged_shards.shard_error(raised.value, [shard]))
  assert message.startswith(
      'damaged record shard: %s (its records at bytes %d..%d are not the chunks of video '
      'long its index lists); rebuild it with: ' % (shard, bounds[2], bounds[4]))


def test_training_clips_of_a_long_video_read_about_their_frames(long_video):
  """Through the whole training pipeline: bytes read per clip near the clip's own bytes,
  far from the 300-frame video's."""
  directory, _, frames, _ = long_video
  split = dataset_split.DatasetSplit(
      name='long', split_name='train', dataset_dir=directory,
      file_pattern=shards.shard_file_pattern(directory, 'train', 1), num_samples=3,
      num_classes=3, labels_to_names={0: 'a', 1: 'b', 2: 'c'}, num_channels=3,
      modality='rgb')
  clips = 24
  with tf.Graph().as_default(), tf.Session() as sess:
    dataset = clip_input.build_clip_dataset(split, InputSettings(
        batch_size=1, clip_frames=CLIP, image_size=32, num_readers=1, num_parallel_calls=1,
        prefetch_batches=1, seed=3, deferred=True), is_training=True)
    labels = tf.data.make_one_shot_iterator(dataset).get_next()[1]
    sess.run(labels)
    before = _rchar()
    drawn = [int(sess.run(labels)[0]) for _ in range(clips)]
    per_clip = (_rchar() - before) / clips
  frame_bytes = max(len(f) for v in frames.values() for f in v)
  assert set(drawn) == {0, 1, 2}
  # At most 64 + 2 * 7 frames per clip (and the short video's 5 frames are fewer).
  assert per_clip < (CLIP + 2 * (CHUNK - 1)) * frame_bytes * 1.1
  assert per_clip < 0.45 * sum(len(f) for f in frames['long'])


@pytest.mark.parametrize('damage', ['cut short', 'one byte changed'])
def test_a_damaged_shard_is_named_with_its_video(long_video, tmp_path, damage):
  _, shard, _, entries = long_video
  entry = entries['long']
  with open(shard, 'rb') as handle:
    data = bytearray(handle.read())
  middle = (entry['byte_bounds'][10] + entry['byte_bounds'][11]) // 2   # inside chunk 10
  if damage == 'cut short':
    data = data[:middle]
  else:
    data[middle] ^= 0xFF   # the record's CRC no longer matches
  copy = str(tmp_path / 'train-00000-of-00001')
  with open(copy, 'wb') as handle:
    handle.write(bytes(data))
  with tf.Graph().as_default(), tf.Session() as sess:
    video = video_records.parse_index_entry(tf.constant(_serialized_entry(entry)))
    read, _ = clip_reader.read_frames(tf.constant(copy), video, tf.range(70, 100), 'rgb')
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
      sess.run(read)
    good, _ = clip_reader.read_frames(tf.constant(copy), video, tf.range(0, 30), 'rgb')
    assert sess.run(tf.size(good)) == 32   # the chunks before the damage still read
  # Frames 70..99 are chunks 8..12: the read's bytes, the shard and the video are named,
  # and what is wrong there is found from the framing.
  bounds = entry['byte_bounds']
  assert 'damaged records (unread): bytes %d..%d of %s for video long' % (
      bounds[8], bounds[13], copy) in str(raised.value)
  problem = ('truncated: the file ends at byte %d, inside the records at bytes %d..%d that '
             'its index lists (a partial copy?)' % (middle, bounds[8], bounds[13])
             if damage == 'cut short' else
             'corrupted: the record at byte %d fails its data CRC' % bounds[10])
  message = str(damaged_shards.shard_error(raised.value, [copy]))
  assert message.startswith('damaged record shard: %s (%s; video long, bytes %d..%d); '
                            'rebuild it with: ' % (copy, problem, bounds[8], bounds[13]))
