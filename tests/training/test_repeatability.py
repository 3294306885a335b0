"""--random_seed, --deterministic, the input's position in the checkpoint, --log_example_ids:
runs repeat, and a stopped run resumes as if it had never stopped.

The reference of "the same" is another run of the trainer (the straight one), compared
bitwise with --deterministic (TensorFlow's op determinism: every kernel sums in one
order, on any CPU); what was trained is counted from example_ids.tsv, not inferred from
the weights. LeNet keeps its dropout (keep 0.5): its masks are part of what must repeat
(nets.dropout). A stop is the stop a SIGTERM makes (the entry's handler sets the
trainer's stop event; here it is set after the step the test names): the chief saves the
step reached, and the resumed run continues from that checkpoint.
"""

import numpy as np
import pytest

from core.errors import ConfigError
from tests import video_testdata
from tests.training.test_train_video import video_config
from tf_compat import tf
from training import train as train_module
from training.config import TrainConfig
from training.example_ids import read_example_ids
from training.progress import ProgressStep
from training.setup import check_train_config

pytestmark = pytest.mark.slow

TRAIN_IMAGES = 1437   # digits' train split
SEED = 7


def _digits(digits_dir, train_dir, **overrides):
  values = dict(dataset_name='digits', dataset_dir=digits_dir, model_name='lenet',
                train_dir=str(train_dir), batch_size=16, optimizer='momentum',
                learning_rate=0.01, num_readers=2, num_preprocessing_threads=2,
                log_every_n_steps=10, save_summaries_secs=600, save_interval_secs=600,
                random_seed=SEED, deterministic=True, log_example_ids=True)
  values.update(overrides)
  return TrainConfig(**values)


def _weights(train_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if not name.startswith('input_position')}


def _max_difference(first, second):
  assert first.keys() == second.keys()
  return max(float(np.max(np.abs(first[name].astype(np.float64) - second[name])))
             for name in first if first[name].size)


def _stopping_at(monkeypatch, steps):
  """The trainer's stop event is set once the global step reaches one of `steps`, as the
  entry's SIGTERM handler sets it (training stops before its next step, saving)."""
  original = ProgressStep.__call__

  def call(self, sess, train_op, global_step, kwargs):
    result = original(self, sess, train_op, global_step, kwargs)
    if self.last_global_step in steps and self._stop_event is not None:
      self._stop_event.set()
    return result
  monkeypatch.setattr(ProgressStep, '__call__', call)


def _train(config, stop=False):
  import threading  # pylint: disable=import-outside-toplevel
  return train_module.train(config, stop_event=threading.Event() if stop else None)


@pytest.mark.parametrize('topology', [dict(num_clones=1), dict(num_clones=2, clone_on_cpu=True),
                                      dict(num_micro_batches=2)],
                         ids=['1 clone', '2 clones', '2 micro-batches'])
def test_two_runs_with_one_seed_end_bitwise_equal(digits_dir, tmp_path, topology):
  for name in ('first', 'second'):
    _train(_digits(digits_dir, tmp_path / name, max_number_of_steps=12, **topology))
  assert _max_difference(_weights(tmp_path / 'first'), _weights(tmp_path / 'second')) == 0
  assert read_example_ids(tmp_path / 'first') == read_example_ids(tmp_path / 'second')
  # Another seed is another run: other initial weights and another order.
  _train(_digits(digits_dir, tmp_path / 'other', max_number_of_steps=12, random_seed=8,
                 **topology))
  assert _max_difference(_weights(tmp_path / 'first'), _weights(tmp_path / 'other')) > 0
  assert read_example_ids(tmp_path / 'first') != read_example_ids(tmp_path / 'other')


def _epoch_order(train_dir, num_clones):
  """Every example drawn, in the order the steps drew them (micro-batch, then clone)."""
  order = []
  for step, rows in sorted(read_example_ids(train_dir).items()):
    assert len(rows) == 16 * num_clones, step
    order += [example for _, _, example in sorted(rows, key=lambda r: (r[1], r[0]))]
  return order


@pytest.mark.parametrize('num_clones', [1, 2])
def test_a_run_stopped_twice_and_resumed_equals_the_straight_run(digits_dir, tmp_path,
                                                                  monkeypatch, num_clones):
  """The straight run and a run stopped at steps 17 and 29 both train to the end of the
  first epoch and 3 steps beyond: equal weights, the same examples at every step, and
  the first epoch trained every train image once."""
  steps = -(-TRAIN_IMAGES // (16 * num_clones)) + 3
  topology = dict(num_clones=num_clones, clone_on_cpu=num_clones > 1)
  _train(_digits(digits_dir, tmp_path / 'straight', max_number_of_steps=steps, **topology))
  _stopping_at(monkeypatch, {17, 29})
  stopped = _digits(digits_dir, tmp_path / 'stopped', max_number_of_steps=steps, **topology)
  assert [_train(stopped, stop=True).global_step for _ in range(3)] == [17, 29, steps]
  assert _max_difference(_weights(tmp_path / 'straight'), _weights(tmp_path / 'stopped')) == 0
  order = _epoch_order(tmp_path / 'stopped', num_clones)
  assert order == _epoch_order(tmp_path / 'straight', num_clones)
  first_epoch = order[:TRAIN_IMAGES]
  assert len(set(first_epoch)) == TRAIN_IMAGES  # none twice, none left out
  assert set(order[TRAIN_IMAGES:]) <= set(first_epoch)


def test_a_checkpoint_holds_the_input_position_and_an_older_one_still_resumes(
    digits_dir, tmp_path, caplog):
  caplog.set_level('INFO')
  config = _digits(digits_dir, tmp_path / 'run', max_number_of_steps=3)
  _train(config)
  # A seeded run (_digits' own settings) says it repeats (the unseeded one:
  # test_the_start_up_says_whether_the_run_repeats).
  assert 'Repeatable: --random_seed=7, bitwise (--deterministic' in caplog.text
  assert '--random_seed=7' in (tmp_path / 'run' / 'flags.cfg').read_text().splitlines()
  # The switch is the run's: TensorFlow's op determinism is off again after it.
  from tensorflow.python.framework import (  # pylint: disable=import-outside-toplevel
      config as framework_config)
  assert not framework_config.is_op_determinism_enabled()
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'run')))
  assert [name for name in reader.get_variable_to_shape_map()
          if name.startswith('input_position_')]
  # Other input settings (a batch of 8): the saved position is not theirs.
  caplog.clear()
  result = _train(_digits(digits_dir, tmp_path / 'run', max_number_of_steps=5, batch_size=8))
  assert result.global_step == 5
  assert 'holds no input position for these input settings' in caplog.text


# One clone of one micro-batch: every random draw of the clips and the net is also in the
# '2 micro-batches' case (one clone), and that topology's repeat in
# test_two_runs_with_one_seed_end_bitwise_equal[1 clone].
@pytest.mark.parametrize('topology', [dict(num_clones=2),
                                      dict(num_clones=1, num_micro_batches=2)],
                         ids=['2 clones', '2 micro-batches'])
def test_video_clips_repeat_with_one_seed(tmp_path_factory, tmp_path, topology):
  """I3D (narrow) on clips: random starts, crops and flips, dropout, batch norm."""
  rgb_dir = video_testdata.converted(tmp_path_factory, 'rgb')
  for name in ('first', 'second'):
    _train(video_config(rgb_dir, tmp_path / name, max_number_of_steps=2, random_seed=SEED,
                        deterministic=True, log_example_ids=True, **topology))
  assert _max_difference(_weights(tmp_path / 'first'), _weights(tmp_path / 'second')) == 0
  ids = read_example_ids(tmp_path / 'first')
  assert ids == read_example_ids(tmp_path / 'second') and len(ids) == 2


def test_the_start_up_says_whether_the_run_repeats(digits_dir, tmp_path, caplog):
  """The unseeded run; the seeded run's line, flagfile and op determinism switched off
  after it: test_a_checkpoint_holds_the_input_position_and_an_older_one_still_resumes."""
  caplog.set_level('INFO')
  _train(_digits(digits_dir, tmp_path / 'unseeded', max_number_of_steps=1, random_seed=None,
                 deterministic=False, log_example_ids=False))
  assert 'Repeatable: no (no --random_seed' in caplog.text
  assert not (tmp_path / 'unseeded' / 'example_ids.tsv').exists()


def test_deterministic_needs_a_seed_in_one_line(digits_dir, tmp_path):
  with pytest.raises(ConfigError, match=r'^--deterministic needs --random_seed .*add '
                     r'--random_seed=N$'):
    check_train_config(_digits(digits_dir, tmp_path, random_seed=None))
  with pytest.raises(ConfigError, match=r'--random_seed=-1 must be in \[0, 2\*\*31\)'):
    check_train_config(_digits(digits_dir, tmp_path, random_seed=-1))


def test_nosave_input_position_keeps_the_checkpoint_to_its_variables(digits_dir, tmp_path,
                                                                     caplog):
  caplog.set_level('INFO')
  _train(_digits(digits_dir, tmp_path / 'run', max_number_of_steps=2,
                 save_input_position=False))
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'run')))
  assert not [n for n in reader.get_variable_to_shape_map() if n.startswith('input_position')]
  assert '--nosave_input_position: a resume starts a new pass over the data' in caplog.text
