"""Evaluation never scores fewer videos (or images) silently: on copies of the shared
synthetic records with a frame broken, an index cut (refused before the graph: issue 21's
addendum) or a byte flipped, and on digits with an image cut short. What to expect is computed here from the records
(protobuf) and the framing; where eval.py's exit status and its lines are what is checked,
its path runs in this process (tests/entries.py `evaluate`)."""

import json
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from core import errors
from datasets.formats import damaged_shards
from evaluation import run
from evaluation.config import EvalConfig
from nets import nets_factory
from tests import damaged_data, video_testdata as vt
from tests.entries import evaluate
from tf_compat import tf


def _copy(tmp_path_factory, tmp_path):
  return damaged_data.copy_dataset(vt.converted(tmp_path_factory, 'rgb'), tmp_path / 'rgb')


@pytest.mark.slow
def test_videos_that_cannot_be_scored_are_listed_and_the_status_is_4(tmp_path_factory,
                                                                    tmp_path, capsys):
  directory = _copy(tmp_path_factory, tmp_path)
  first = os.path.join(directory, 'test-00000-of-00002')
  broken = damaged_data.break_frames(first, 0, [1])          # sampled: frames 0..3
  unsampled = damaged_data.break_frames(first, 1, [damaged_data.num_frames(first, 1) - 1])
  capsys.readouterr()
  status, [result] = _run_eval(tmp_path_factory, directory, tmp_path / 'eval')
  printed, stderr = run.summary(result), capsys.readouterr().err
  report = 'exit %d\n%s\n%s' % (status, printed, stderr)
  assert status == errors.INCOMPLETE, report
  with open(os.path.join(directory, 'dataset_info.json')) as handle:
    listed = json.load(handle)['splits']['test']
  reason = 'frame 1 of %d does not decode (shard %s)' % (damaged_data.num_frames(first, 0),
                                                         first)
  lines = printed.splitlines()
  assert lines[0].startswith('video_folder/test: %d of %d videos scored, '
                             % (listed - 1, listed)), report
  assert lines[3:5] == [
      'rgb: 1 videos not scored (not in the metrics):', '  %s: %s' % (broken, reason)], report
  [error] = [line for line in stderr.splitlines() if line.startswith('error:')]
  assert error == ('error: 1 videos of video_folder/test could not be scored (listed above '
                   'and in the report); the figures are over the rest')
  with open(tmp_path / 'eval' / 'report-7.json') as handle:
    saved = json.load(handle)
  scored = {video['id'] for video in saved['videos']}
  assert scored == set(vt.read_records(vt.converted(tmp_path_factory, 'rgb'))) - {
      broken} and unsampled in scored and len(scored) == listed - 1
  assert saved['dataset']['num_videos'] == listed - 1
  assert saved['dataset']['unscored_videos'] == 1
  assert saved['streams']['rgb']['unscored'] == {
      'count': 1, 'not_read': 0, 'videos': [{'id': broken, 'reason': reason}]}
  accumulator = EventAccumulator(str(tmp_path / 'eval'), size_guidance={'scalars': 0})
  accumulator.Reload()
  assert [e.value for e in accumulator.Scalars('eval/unscored_videos')] == [1.0]


def _run_eval(tmp_path_factory, directory, eval_dir):
  """eval.py's path, in this process, on `directory` with the shared rgb checkpoint
  (global step 7): (exit status, [run.Run])."""
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  return evaluate(['--dataset_name=video_folder', '--model_name=i3d',
                   '--depth_multiplier=%g' % vt.DEPTH, '--dataset_dir=%s' % directory,
                   '--checkpoint_path=%s' % prefix, '--eval_image_size=32', '--clip_frames=4',
                   '--batch_size=3', '--eval_dir=%s' % eval_dir])


@pytest.mark.slow
def test_an_index_cut_into_a_header_stops_evaluation_before_it_scores(tmp_path_factory,
                                                                       tmp_path, capsys):
  """TensorFlow reads an index cut inside an entry's 12-byte header without an error, one
  video short: eval.py refuses it with the damaged-shard line and status 3."""
  directory = _copy(tmp_path_factory, tmp_path)
  index = os.path.join(directory, 'test-00001-of-00002.index')
  expected = damaged_data.cut_into_last_header(index)
  capsys.readouterr()
  status, results = _run_eval(tmp_path_factory, directory, tmp_path / 'eval')
  stderr = capsys.readouterr().err
  report = 'exit %d\n%s' % (status, stderr)
  assert status == errors.DATA, report
  [error] = [line for line in stderr.splitlines() if line.startswith('error:')]
  assert error == expected, report
  assert not os.path.exists(tmp_path / 'eval' / 'report-7.json') and not results


def _config(tmp_path_factory, directory):
  """The EvalConfig of _run_eval's command, in process."""
  prefix, _, _ = vt.shared_checkpoint(tmp_path_factory, 'rgb_ema')
  return EvalConfig(dataset_name='video_folder', dataset_dir=directory, model_name='i3d',
                    depth_multiplier=vt.DEPTH, checkpoint_path=prefix, eval_image_size=32,
                    clip_frames=4, batch_size=3)


def test_an_index_cut_between_entries_stops_evaluation(tmp_path_factory, tmp_path):
  """Cut at an entry's end (it read as one video short, exit 4, before the addendum)."""
  directory = _copy(tmp_path_factory, tmp_path)
  index = os.path.join(directory, 'test-00001-of-00002.index')
  damaged_data.truncate(index, damaged_data.record_offsets(index)[-1][0])
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    list(run.evaluations(_config(tmp_path_factory, directory)))
  assert str(raised.value).startswith('damaged record shard: %s (its ' % index)
  assert errors.report(raised.value) == errors.DATA


def test_a_damaged_shard_stops_evaluation_with_the_rebuild_command(tmp_path_factory,
                                                                  tmp_path):
  directory = _copy(tmp_path_factory, tmp_path)
  shard = os.path.join(directory, 'test-00001-of-00002')
  # The first chunk of the second video, which its one clip from frame 0 reads.
  video, frames, bounds = damaged_data.index_entries(shard)[1]
  offset = bounds[0]
  damaged_data.flip_byte(shard, offset + 12 + 100)
  last_read = bounds[[f >= 4 for f in frames].index(True)]
  with pytest.raises(damaged_shards.DamagedShards) as raised:
    list(run.evaluations(_config(tmp_path_factory, directory)))
  assert str(raised.value) == (
      'damaged record shard: %s (corrupted: the record at byte %d fails its data CRC; video '
      '%s, bytes %d..%d); rebuild it with: python -m datasets.convert_videos --output_dir=%s '
      '--only_shard=test-00001-of-00002' % (shard, offset, video, offset, last_read,
                                            directory))


def _random_lenet(prefix):
  """A LeNet checkpoint of random weights (step 3): its prefix."""
  with tf.Graph().as_default():
    network_fn = nets_factory.get_network_fn('lenet', 10, is_training=False)
    network_fn(tf.zeros([1, 28, 28, 1]))
    rng = np.random.RandomState(0)
    values = {v.op.name: rng.normal(0, 0.1, v.shape.as_list()).astype(np.float32)
              for v in tf.global_variables()}
  values['global_step'] = np.array(3, np.int64)
  return vt.write_checkpoint(prefix, values)


def test_images_that_do_not_decode_are_listed_not_scored(digits_dir, tmp_path):
  directory = damaged_data.copy_dataset(digits_dir, tmp_path / 'digits')
  shard = os.path.join(directory, 'test-00001-of-00004')
  damaged_data.break_image(shard, 7)
  config = EvalConfig(dataset_name='digits', dataset_dir=directory, model_name='lenet',
                      checkpoint_path=_random_lenet(str(tmp_path / 'model.ckpt-3')),
                      eval_dir=str(tmp_path / 'eval'))
  [evaluated] = list(run.evaluations(config))
  image = evaluated.result
  assert image.unscored == (('record 7 of %s' % shard, 'the image does not decode'),)
  assert image.num_examples == 359 and image.metrics.top1 == pytest.approx(image.accuracy)
  assert run.exit_status(config, [evaluated]) == errors.INCOMPLETE
  with open(evaluated.report_path) as handle:
    saved = json.load(handle)
  assert saved['dataset']['unscored_images'] == 1
  assert saved['streams']['image']['unscored']['images'] == [
      {'id': 'record 7 of %s' % shard, 'reason': 'the image does not decode'}]
