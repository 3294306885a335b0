"""Frames that do not decode: found frame by frame, skipped in training with the video
named once, reported by evaluation (decoding past a frame that fails:
tests/datasets/formats/test_checked_decode.py). The damaged records are the shared synthetic
ones with JPEG bytes cut in half (tests/damaged_data.py)."""

import dataclasses
import logging
import os

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import clip_input, damaged_frames
from datasets.inputs.input_settings import InputSettings, Sampling
from tests import damaged_data, video_testdata
from tf_compat import tf


def test_skip_counter_names_each_video_once_and_counts_every_clip(caplog):
  skips = damaged_frames.SkipCounter(limit=1)
  caplog.set_level(logging.WARNING)
  for video in (b'v_a', b'v_a', b'v_b', b'v_a'):
    assert skips.record(video, b'/d/train-00001-of-00002', np.array([3], np.int32), 9) is False
    assert skips.exceeded == (video == b'v_b' or skips.damaged_videos > 1)
  named = [r.getMessage() for r in caplog.records if 'Skipping' in r.getMessage()]
  assert len(named) == 2
  assert named[0].startswith('Skipping a clip of video v_a (shard /d/train-00001-of-00002): '
                             'frame 3 of its 9 does not decode')
  assert (skips.skipped_clips, skips.damaged_videos) == (4, 2)
  assert skips.damaged()['v_b'] == ('/d/train-00001-of-00002', [3], 9)


@pytest.fixture(scope='module')
def damaged_dir(tmp_path_factory):
  """The shared rgb records with every frame of the first train video and frame 1 and the
  last frame of the first two test videos broken: {what: (video id, shard path)}."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path_factory.mktemp('damaged') / 'rgb')
  train = os.path.join(directory, 'train-00000-of-00002')
  test = os.path.join(directory, 'test-00000-of-00002')
  broken = {'train': (damaged_data.break_frames(train, 0, 'all'), train),
            'test_sampled': (damaged_data.break_frames(test, 0, [1]), test)}
  last = damaged_data.num_frames(test, 1) - 1
  broken['test_unsampled'] = (damaged_data.break_frames(test, 1, [last]), test)
  return directory, broken


def _labels(directory, split):
  labels = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(directory, '%s-*' % split))):
    for serialized in tf.compat.v1.io.tf_record_iterator(path):
      context = tf.train.SequenceExample.FromString(serialized).context.feature
      labels[context['example/id'].bytes_list.value[0].decode()] = (
          context['clip/label/index'].int64_list.value[0])
  return labels


def _elements(dataset):
  values = []
  with tf.Session() as sess:
    get_next = tf.data.make_one_shot_iterator(dataset).get_next()
    while True:
      try:
        values.append(sess.run(get_next))
      except tf.errors.OutOfRangeError:
        return values


def test_training_skips_the_damaged_video_and_keeps_the_rest(damaged_dir):
  directory, broken = damaged_dir
  split = dataset_factory.get_dataset('video_folder', 'train', directory)
  skips = damaged_frames.SkipCounter()
  with tf.Graph().as_default():
    batches = _elements(clip_input.build_clip_dataset(split, InputSettings(
        batch_size=1, clip_frames=4, image_size=32, num_epochs=1, drop_remainder=False,
        num_readers=1, num_parallel_calls=1, seed=3), is_training=True, skips=skips))
  labels = _labels(directory, 'train')
  damaged_id, shard = broken['train']
  kept = sorted(int(label) for _, batch_labels in batches for label in batch_labels)
  assert kept == sorted(label for v, label in labels.items() if v != damaged_id)
  assert skips.skipped_clips == 1 and list(skips.damaged()) == [damaged_id]
  assert skips.damaged()[damaged_id][0] == shard


def test_evaluation_reports_a_sampled_frame_that_does_not_decode(damaged_dir):
  directory, broken = damaged_dir
  split = dataset_factory.get_dataset('video_folder', 'test', directory)
  settings = InputSettings.for_sampling(
      Sampling(eval_frames=None, eval_clips=1, clip_frames=4, crop_size=32), batch_size=3,
      num_epochs=1, drop_remainder=False, num_readers=1)
  with tf.Graph().as_default():
    batches = _elements(clip_input.build_clip_dataset(
        split, dataclasses.replace(settings, report_damaged=True), is_training=False))
  damage = {video.decode(): (reason.decode(), clips)
            for clips_batch, _, ids, reasons in batches
            for clips, video, reason in zip(clips_batch, ids, reasons)}
  assert sorted(damage) == sorted(_labels(directory, 'test'))
  sampled_id, shard = broken['test_sampled']
  reason, clips = damage[sampled_id]
  frames = damaged_data.num_frames(shard, 0)
  assert reason == 'frame 1 of %d does not decode (shard %s)' % (frames, shard)
  assert np.all(clips[0, 1] == -1.0) and not np.all(clips[0, 0] == -1.0)  # only it is zeros
  assert damage[broken['test_unsampled'][0]][0] == ''   # its broken frame is not sampled
  assert [v for v, (r, _) in damage.items() if r] == [sampled_id]
  with tf.Graph().as_default():
    with pytest.raises(tf.errors.InvalidArgumentError, match=sampled_id):
      _elements(clip_input.build_clip_dataset(split, settings, is_training=False))


def _stream(rows):
  """Elements (x, video id, shard, undecoded int32 [n], num_frames) of `rows`, in order."""
  def generate():
    for x, video, undecoded in rows:
      yield x, video, '/d/train-0', np.array(undecoded, np.int32), 9
  return tf.data.Dataset.from_generator(generate, output_signature=(
      tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string),
      tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)))


def test_marked_clips_reach_the_counter_as_the_batches_are_drawn(caplog):
  """The tf.data service's form: every clip travels with its mark, and the trainer drops
  the damaged ones and tells the counter, with the same counts skip_damaged gives; a
  damaged clip last of the stream is reported too."""
  rows = [(0, 'v_ok', []), (1, 'v_a', [2]), (2, 'v_a', [2]), (3, 'v_ok', []),
          (4, 'v_b', [0, 5]), (5, 'v_ok', []), (6, 'v_ok', []), (7, 'v_c', [1])]
  caplog.set_level(logging.WARNING)
  carried, direct = damaged_frames.SkipCounter(), damaged_frames.SkipCounter()
  with tf.Graph().as_default():
    batches = _elements(damaged_frames.drop_marked(carried)(
        damaged_frames.mark_damaged(_stream(rows)).batch(2)))
    kept = _elements(damaged_frames.skip_damaged(_stream(rows), direct))
  assert [list(x) for (x,) in batches] == [[0], [3], [5], [6]]
  assert [x for (x,) in kept] == [0, 3, 5, 6]
  assert (carried.skipped_clips, carried.damaged()) == (4, {
      'v_a': ('/d/train-0', [2], 9), 'v_b': ('/d/train-0', [0, 5], 9),
      'v_c': ('/d/train-0', [1], 9)})
  assert carried.damaged() == direct.damaged()
  assert carried.skipped_clips == direct.skipped_clips
