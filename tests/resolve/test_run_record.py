"""resolve.run_record: a run's flags.cfg read back and laid over an entry's flags.

The records here are written in the trainer's layout by hand, to reach every case;
tests/evaluation/test_run.py and tests/test_export.py read records the real trainer wrote.
"""

import logging

import pytest

from core.errors import DataError
from core.params import ConfigError
from evaluation.config import EvalConfig
from evaluation.setup import EVAL_LINKS
from resolve import run_record
from resolve.run_record import Link

RECORD = ('# Replay: python train_image_classifier.py --flagfile=flags.cfg --train_dir=DIR\n'
          '--model_name=i3d\n--depth_multiplier=0.125\n--dataset_name=video_folder\n'
          '--dataset_dir={data}\n--labels_offset=0\n--train_image_size=32\n--clip_frames=4\n'
          '--norepeat_first_frame\n--use_batch_norm\n--learning_rate_boundaries=10,20\n')


@pytest.fixture
def train_dir(tmp_path):
  (tmp_path / 'data').mkdir()
  train = tmp_path / 'train'
  train.mkdir()
  (train / 'flags.cfg').write_text(RECORD.format(data=tmp_path / 'data'))
  return train


def differ_lines(caplog):
  return [r.getMessage() for r in caplog.records if 'differ from the run' in r.getMessage()]


def test_the_record_is_read_in_the_trainers_layout(train_dir):
  record = run_record.read_record(str(train_dir / 'flags.cfg'))
  assert record.text('model_name') == 'i3d' and record.text('clip_frames') == '4'
  assert record.text('repeat_first_frame') == 'false' and record.text('use_batch_norm') == 'true'
  assert record.text('learning_rate_boundaries') == '10,20'
  assert record.number('depth_multiplier', None) == 0.125
  assert record.number('precise_bn_batches', 0) == 0 and record.text('master') is None


@pytest.mark.parametrize('path', ['{d}', '{d}/model.ckpt-7', '{d}/model.ckpt-7.index',
                                  '{d}/model.ckpt-7.data-00000-of-00001'])
def test_it_is_found_from_a_train_dir_or_a_checkpoint_in_it(train_dir, path):
  record = run_record.find_record(path.format(d=train_dir))
  assert record.path == str(train_dir / 'flags.cfg')


def test_no_record_beside_a_bare_checkpoint(tmp_path):
  assert run_record.find_record(str(tmp_path / 'model.ckpt-7')) is None
  assert run_record.find_record(str(tmp_path)) is None
  assert run_record.find_record(None) is None


def test_a_damaged_line_is_a_data_error(train_dir):
  (train_dir / 'flags.cfg').write_text('--model_name=i3d\nclip_frames=4\n')
  with pytest.raises(DataError, match=r"flags.cfg line 2: 'clip_frames=4' is not a "):
    run_record.read_record(str(train_dir / 'flags.cfg'))
  (train_dir / 'flags.cfg').write_text('--clip_frames=four\n')
  record = run_record.read_record(str(train_dir / 'flags.cfg'))
  with pytest.raises(DataError, match='--clip_frames=four is not a int'):
    run_record.fill_from_record(EvalConfig(), frozenset(), record, EVAL_LINKS)


def test_the_record_fills_what_was_not_given(train_dir, tmp_path, caplog):
  record = run_record.find_record(str(train_dir))
  config = EvalConfig(checkpoint_path=str(train_dir))
  filled, settings = run_record.fill_from_record(config, {'checkpoint_path'}, record,
                                                 EVAL_LINKS)
  assert (filled.model_name, filled.depth_multiplier, filled.dataset_name,
          filled.dataset_dir, filled.eval_image_size, filled.clip_frames,
          filled.use_batch_norm) == ('i3d', 0.125, 'video_folder', str(tmp_path / 'data'),
                                     32, 4, True)
  sources = {entry.name: entry.source for entry in settings.entries}
  assert sources['eval_image_size'] == 'record' and sources['moving_average_decay'] == 'default'
  assert settings.as_dict()['eval_image_size'] == {'value': 32, 'from': 'record',
                                                   'recorded_as': 'train_image_size'}
  assert differ_lines(caplog) == []


def test_a_given_flag_wins_and_only_those_that_differ_are_named_in_one_line(train_dir,
                                                                            caplog):
  caplog.set_level(logging.WARNING)
  record = run_record.find_record(str(train_dir))
  config = EvalConfig(checkpoint_path=str(train_dir), clip_frames=8, depth_multiplier=0.125,
                      eval_image_size=48, repeat_first_frame=False)
  given = {'checkpoint_path', 'clip_frames', 'depth_multiplier', 'eval_image_size',
           'repeat_first_frame'}
  filled, settings = run_record.fill_from_record(config, given, record, EVAL_LINKS)
  assert (filled.clip_frames, filled.eval_image_size, filled.model_name) == (8, 48, 'i3d')
  assert differ_lines(caplog) == [
      'given flags differ from the run\'s record %s: --eval_image_size=48 (the run: '
      '--train_image_size=32), --clip_frames=8 (the run: --clip_frames=4)' % record.path]
  assert {e.name: e.source for e in settings.entries}['clip_frames'] == 'flag'


def test_a_flag_that_excludes_a_recorded_one_keeps_it_out(train_dir):
  record = run_record.find_record(str(train_dir))
  filled, _ = run_record.fill_from_record(EvalConfig(eval_frames=10), {'eval_frames'},
                                          record, EVAL_LINKS)
  assert filled.clip_frames is None and filled.eval_image_size == 32


def test_a_moved_run_needs_its_dataset_dir_in_one_line(train_dir, tmp_path):
  (tmp_path / 'data').rename(tmp_path / 'moved')
  record = run_record.find_record(str(train_dir))
  with pytest.raises(ConfigError) as error:
    run_record.fill_from_record(EvalConfig(), frozenset(), record, EVAL_LINKS)
  assert str(error.value) == (
      '--dataset_dir is needed: the run\'s record %s names --dataset_dir=%s, which no '
      'longer exists (a moved run?); give --dataset_dir=DIR' % (record.path, tmp_path / 'data'))
  filled, _ = run_record.fill_from_record(EvalConfig(dataset_dir=str(tmp_path / 'moved')),
                                          {'dataset_dir'}, record, EVAL_LINKS)
  assert filled.dataset_dir == str(tmp_path / 'moved')


def test_without_a_record_the_config_is_as_given():
  config = EvalConfig(model_name='lenet', eval_image_size=28)
  filled, settings = run_record.fill_from_record(config, {'model_name', 'eval_image_size'},
                                                 None, EVAL_LINKS)
  assert filled is config
  assert settings.as_dict()['record'] is None
  assert {e.name: e.source for e in settings.entries}['model_name'] == 'flag'
  assert {e.name: e.source for e in settings.entries}['clip_frames'] == 'default'


def test_changed_fields_stand_for_the_given_flags_of_a_config_built_in_code():
  assert run_record.changed_fields(EvalConfig(clip_frames=4, watch=True)) == {
      'clip_frames', 'watch'}


def test_links_name_fields_of_the_entry():
  with pytest.raises(KeyError):
    run_record.fill_from_record(EvalConfig(), frozenset(), run_record.RunRecord('x', {}),
                                (Link('clip_frames', 'no_such_field'),))


def test_a_checkpoint_path_that_exists_in_any_form_passes(train_dir):
  (train_dir / 'model.ckpt-7.index').write_text('')
  for path in (train_dir, train_dir / 'model.ckpt-7', train_dir / 'model.ckpt-7.index',
               'gs://bucket/run'):   # remote: TensorFlow's reader answers later
    assert run_record.check_checkpoint_path(str(path)) is None


def test_a_missing_checkpoint_path_names_what_is_alike_beside_it(train_dir, tmp_path):
  (train_dir / 'model.ckpt-100.index').write_text('')
  (train_dir / 'model.ckpt-100.data-00000-of-00001').write_text('')
  cases = [
      (tmp_path / 'trian', 'similar: %s' % train_dir),   # a mistyped run dir
      (train_dir / 'model.ckpt-1000', 'similar: %s' % (train_dir / 'model.ckpt-100')),
      (tmp_path / 'elsewhere' / 'deeper' / 'train', 'the nearest directory that exists '
                                                    'is %s' % tmp_path)]
  for path, nearby in cases:
    with pytest.raises(ConfigError) as error:
      run_record.check_checkpoint_path(str(path), 'flow_checkpoint_path')
    assert str(error.value) == (
        '--flow_checkpoint_path=%s: no such checkpoint, file or directory (%s); give a '
        'training directory, a checkpoint prefix such as model.ckpt-1000, or one of its '
        'files' % (path, nearby))
