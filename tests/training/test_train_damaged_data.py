"""Training on damaged video records: clips whose frames do not decode are skipped, named
once, counted in the log and in the chief's TensorBoard; past --max_damaged_fraction the
run stops with one line and status 3 (train_image_classifier.py's main, called in this
process: tests/entries.py); a truncated shard stops it with one line naming the file
and the command that rebuilds it. The records are copies of tests/video_testdata.py's,
damaged by tests/damaged_data.py; counts are read back from the event files with
TensorBoard's EventAccumulator. A truncated shard is shown on digits (TensorFlow's
reader's error; LeNet builds in a second) and on video records (the chunk reader's reads
by byte range, which name the video too)."""

import glob
import logging
import os
import re

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from core import errors
from datasets.formats import damaged_shards
from tests import damaged_data, video_testdata
from tests.entries import train_main
from training import train as train_module
from training.config import TrainConfig

FLAGS = dict(dataset_name='video_folder', model_name='i3d', num_clones=1, clone_on_cpu=True,
             batch_size=2, clip_frames=4, train_image_size=32,
             depth_multiplier=video_testdata.DEPTH, optimizer='sgd', learning_rate=0.01,
             learning_rate_decay_type='fixed', num_readers=1, num_preprocessing_threads=1,
             log_every_n_steps=2, save_summaries_secs=600, save_interval_secs=600)


def _data_error_line(directory, train_dir, steps, capsys):
  """The trainer's main on `directory`: status 3 (damaged data), no traceback, ONE
  `error:` line among its lines on stderr; -> (that line, a report for assertions)."""
  status = train_main(['--dataset_dir=%s' % directory, '--train_dir=%s' % train_dir,
                       '--max_number_of_steps=%d' % steps] +
                      ['--%s=%s' % item for item in FLAGS.items()])
  stderr = capsys.readouterr().err
  report = 'exit %d\n%s' % (status, stderr)
  assert status == errors.DATA and 'Traceback' not in stderr, report
  [line] = [line for line in stderr.splitlines() if line.startswith('error:')]
  return line, report


@pytest.fixture
def damaged(tmp_path_factory, tmp_path):
  """A copy of the rgb records with every frame of the first train video broken:
  (directory, video id, its shard)."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = os.path.join(directory, 'train-00000-of-00002')
  return directory, damaged_data.break_frames(shard, 0, 'all'), shard


def _scalars(train_dir):
  accumulator = EventAccumulator(str(train_dir), size_guidance={'scalars': 0})
  accumulator.Reload()
  return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
          for tag in accumulator.Tags()['scalars']}


def test_damaged_clips_are_skipped_named_once_and_counted(damaged, tmp_path, caplog,
                                                         tmp_path_factory):
  directory, video, shard = damaged
  caplog.set_level(logging.INFO)
  config = TrainConfig(dataset_dir=directory, train_dir=str(tmp_path / 'train'),
                       max_number_of_steps=4, max_damaged_fraction=0.5, **FLAGS)
  result = train_module.train(config)   # 0.5 allows 1 damaged video of 2 or more
  assert result.global_step == 4
  named = [r.getMessage() for r in caplog.records if r.getMessage().startswith('Skipping')]
  assert len(named) == 1 and named[0].startswith(
      'Skipping a clip of video %s (shard %s): frames ' % (video, shard))
  scalars = _scalars(tmp_path / 'train')
  assert [step for step, _ in scalars['input/damaged_videos']] == [2, 4]
  assert [value for _, value in scalars['input/damaged_videos']] == [1, 1]
  skipped = [value for _, value in scalars['input/skipped_clips']]
  # 8 good clips drawn one after the other (1 preprocessing thread): every epoch before the
  # one the 8th came from was read whole, its damaged video included.
  good = video_testdata.synthetic_videos(tmp_path_factory)['num_train'] - 1
  whole_epochs = -(-8 // good) - 1
  assert whole_epochs >= 1 and skipped == sorted(skipped) and skipped[-1] >= whole_epochs
  lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith('step 4 ')]
  assert re.search(r'skipped %d clips of 1 damaged video;' % skipped[-1], lines[0])


@pytest.mark.slow
def test_too_many_damaged_videos_stop_with_one_line_and_status_3(damaged, tmp_path,
                                                                  capsys):
  directory, video, shard = damaged
  train_dir = tmp_path / 'train'
  line, report = _data_error_line(directory, train_dir, 50, capsys)
  assert re.fullmatch(
      r'error: 1 video of video_folder/train has frames that do not decode \(\d+ clips '
      r'skipped\), more than --max_damaged_fraction=0.01 allows \(0 of the \d+ videos this '
      r'worker reads\); e.g. %s in %s \(frame \d+ of \d+\); python -m '
      r'datasets.verify_records --dataset_dir=%s lists every damaged shard with the command '
      r'that rebuilds it' % (video, re.escape(shard), re.escape(directory)), line), report
  assert glob.glob(str(train_dir / 'model.ckpt-*.index'))   # saved before it stopped


def test_a_truncated_shard_stops_training_with_the_rebuild_command(digits_dir, tmp_path):
  """Digits (LeNet builds in a second): what happens to a shard is the same for images."""
  directory = damaged_data.copy_dataset(digits_dir, tmp_path / 'digits')
  shard = os.path.join(directory, 'train-00002-of-00004')
  offset, length = damaged_data.record_offsets(shard)[3]
  damaged_data.truncate(shard, offset + 12 + length // 2)
  config = TrainConfig(dataset_name='digits', dataset_dir=directory, model_name='lenet',
                       train_dir=str(tmp_path / 'train'), max_number_of_steps=100,
                       batch_size=16, optimizer='sgd', learning_rate_decay_type='fixed')
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    train_module.train(config)
  assert str(raised.value) == (
      'damaged record shard: %s (truncated: record 3 at byte %d needs %d bytes, the file ends '
      'after %d (%d bytes short: a partial copy?)); rebuild it with: python -m '
      'datasets.convert_images --dataset_name=digits --num_shards=4 --output_dir=%s'
      % (shard, offset, length + 16, 12 + length // 2, length + 4 - length // 2, directory))
  assert errors.report(raised.value) == errors.DATA   # what every entry's main does with it


def test_a_cut_video_shard_stops_training_with_the_rebuild_command(tmp_path_factory,
                                                                    tmp_path):
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  shard = os.path.join(directory, 'train-00000-of-00002')
  # Cut inside the first video's last chunk: every clip of it and of the videos after it
  # needs chunks that are not there.
  _, _, bounds = damaged_data.index_entries(shard)[0]
  size = damaged_data.truncate(shard, bounds[-1] - 50)
  config = TrainConfig(dataset_dir=directory, train_dir=str(tmp_path / 'train'),
                       max_number_of_steps=20, **FLAGS)
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    train_module.train(config)
  assert re.fullmatch(
      r'damaged record shard: %s \(truncated: the file ends at byte %d, (inside|before) the '
      r'records at bytes \d+\.\.\d+ that its index lists( \(a partial copy\?\))?; video '
      r'\S+, bytes \d+\.\.\d+\); rebuild it with: python -m datasets.convert_videos '
      r'--output_dir=%s --only_shard=train-00000-of-00002' % (
          re.escape(shard), size, re.escape(directory)), str(raised.value)), str(raised.value)


@pytest.mark.slow
def test_an_index_cut_into_a_header_stops_training_before_its_graph(tmp_path_factory,
                                                                    tmp_path, capsys):
  """TensorFlow reads an index cut inside an entry's 12-byte header without an error, one
  video short (training ran on 5 of 6 videos, exit 0): refused with the damaged-shard line
  and status 3, before a graph or a checkpoint. The intact copies above train."""
  directory = damaged_data.copy_dataset(video_testdata.converted(tmp_path_factory, 'rgb'),
                                        tmp_path / 'rgb')
  index = os.path.join(directory, 'train-00001-of-00002.index')
  expected = damaged_data.cut_into_last_header(index)
  train_dir = tmp_path / 'train'
  line, report = _data_error_line(directory, train_dir, 2, capsys)
  assert line == expected, report
  assert not glob.glob(str(train_dir / 'model.ckpt-*'))
