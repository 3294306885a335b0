"""What a real training run writes for TensorBoard and the user, read back from its files.

The event files are read with TensorBoard's own event reader; the numbers are checked
against relations that hold independently of the code that wrote them (clone losses add up
to the total; examples/sec is the progress line's; a starved input waits longer).
"""

import dataclasses
import glob
import logging
import os
import re
import threading
import time

import pytest
from absl import flags as flags_module
from tensorboard.backend.event_processing import event_accumulator

from checkpoints import end_marker
from core.params import config_from_flags, define_flags
from datasets.inputs import input_factory
from deployment import accumulation, model_deploy
from deployment.session import session_config
from tests import video_testdata
from tests.training.starved_input import starve_training
from tests.training.lenet_runs import make_config, train_with_timeout
from tf_compat import tf
from training import run_record, summaries
from training import train as train_module
from training.config import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPE = 'synthetic_i3d_rgb_scratch_2xcpu_16f.cfg'


def read_events(train_dir):
  """{tag: [(step, value)]} of every scalar and the set of image and text tags."""
  scalars, others = {}, set()
  for path in sorted(glob.glob(str(train_dir / 'events.out.tfevents.*'))):
    accumulator = event_accumulator.EventAccumulator(
        path, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
                             event_accumulator.TENSORS: 0, event_accumulator.HISTOGRAMS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    for tag in tags['scalars']:
      scalars.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    others |= set(tags['images']) | set(tags['tensors']) | set(tags['histograms'])
  return scalars, others


@pytest.mark.slow
def test_a_run_shows_every_clone_the_input_and_what_it_sees(digits_dir, tmp_path, caplog):
  caplog.set_level(logging.INFO, logger='absl')
  train_dir = tmp_path / 'train'
  config = make_config(digits_dir, train_dir, weight_decay=0.001, save_summaries_secs=1,
                       max_number_of_steps=30, summarize_activations=True)
  train_with_timeout(config)
  scalars, others = read_events(train_dir)
  for tag in ('clone_0/Losses/clone_loss', 'clone_1/Losses/clone_loss', 'Losses/total_loss',
              'clone_0/Losses/regularization_loss', 'learning_rate', 'global_batch_size',
              'clone_0/Accuracy/batch_top1', 'gradient_global_norm', 'examples_per_sec',
              'sec_per_step', 'input/wait_share'):
    assert tag in scalars, sorted(scalars)
  assert {'clone_0/input/images/image/0', 'run/flags/text_summary',
          'run/topology/text_summary'} <= others, sorted(others)
  assert any(tag.startswith('clone_0/activations/') for tag in others), sorted(others)
  assert any(tag.startswith('clone_0/sparsity/') for tag in scalars), sorted(scalars)
  # docs/monitoring.md: clone losses are scaled by 1/num_clones, regularization counted once.
  by_step = {tag: dict(values) for tag, values in scalars.items()}
  for step, total in by_step['Losses/total_loss'].items():
    parts = [by_step[tag][step] for tag in ('clone_0/Losses/clone_loss',
                                            'clone_1/Losses/clone_loss',
                                            'clone_0/Losses/regularization_loss')]
    assert sum(parts) == pytest.approx(total, rel=1e-5)
  # examples/sec is the progress line's number at the same step.
  lines = {int(m.group(1)): float(m.group(2)) for m in (
      re.match(r'step (\d+) of 30: .* \((\d+\.\d) examples/sec', r.getMessage())
      for r in caplog.records) if m}
  assert lines
  for step, value in scalars['examples_per_sec']:
    assert value == pytest.approx(lines[step], abs=0.051)
  # The start-up log says where the clones really ran (a traced first step).
  placements = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith('Placement: ')]
  assert [p.split(' (')[0] for p in placements] == [
      'Placement: clone 0: asked /device:CPU:0, ran on /device:CPU:0',
      'Placement: clone 1: asked /device:CPU:1, ran on /device:CPU:1'], placements
  assert 0.0 <= min(v for _, v in scalars['input/wait_share'])
  assert max(v for _, v in scalars['input/wait_share']) <= 1.0
  # The end marker of a finished run (a stopped one: test_the_end_marker_says_stopped).
  marker = end_marker.read_end_marker(str(train_dir))
  assert (marker.status, marker.global_step, marker.checkpoint) == (
      'finished', 30, 'model.ckpt-30')
  with open(str(train_dir / run_record.FLAGFILE)) as handle:
    assert '--max_number_of_steps=30' in handle.read()


def test_the_flagfile_replays_the_run_into_another_directory(tmp_path, digits_dir):
  config = make_config(digits_dir, tmp_path / 'original', learning_rate=0.02,
                       trainable_scopes=('LeNet/fc4',), num_clones=2)
  values = flags_module.FlagValues()
  define_flags(TrainConfig, values)
  values(['replay', '--train_dir=%s' % (tmp_path / 'copy')]
         + run_record.flag_lines(config))
  replayed = config_from_flags(TrainConfig, values)
  assert replayed == dataclasses.replace(config, train_dir=str(tmp_path / 'copy'))
  assert not any(line.startswith('--train_dir') for line in run_record.flag_lines(config))


def wait_shares(train_dir):
  """The input/wait_share of every progress line but the first (which has none)."""
  return [value for _, value in read_events(train_dir)[0]['input/wait_share']]


@pytest.mark.slow
@pytest.mark.timing
def test_a_starved_input_shows_a_larger_input_wait(digits_dir, tmp_path, monkeypatch):
  """The contrast is built in (a 0.1 s sleep per batch against LeNet steps of a few ms),
  so it cannot flip on a loaded machine: every line of the starved run shows more input
  wait than any line of the same run without the sleep (compared with each other, not
  with a fixed share)."""
  def shares(train_dir):
    train_with_timeout(make_config(digits_dir, train_dir, max_number_of_steps=24,
                                   log_every_n_steps=4))
    return wait_shares(train_dir)
  default = shares(tmp_path / 'default')
  starve_training(monkeypatch, input_factory.IMAGE, 0.1)
  starved = shares(tmp_path / 'starved')
  assert len(default) == len(starved) == 5
  assert min(starved) > max(default), (starved, default)


@pytest.fixture(scope='module')
def rgb_dir(tmp_path_factory):
  return video_testdata.converted(tmp_path_factory, 'rgb')


def recipe_config(dataset_dir, train_dir, *flags):
  """The 2-clone I3D CPU recipe's flags (configs/), on the small test videos: 4x32x32
  clips of an I3D of depth 0.125, 2 per clone, 4 steps with a line each."""
  values = flags_module.FlagValues()
  define_flags(TrainConfig, values)
  values(['recipe', '--flagfile=%s' % os.path.join(ROOT, 'configs', RECIPE),
          '--dataset_dir=%s' % dataset_dir, '--train_dir=%s' % train_dir,
          '--clip_frames=4', '--train_image_size=32', '--depth_multiplier=0.125',
          '--batch_size=2', '--max_number_of_steps=4', '--log_every_n_steps=1',
          '--save_interval_secs=600'] + list(flags))
  return config_from_flags(TrainConfig, values)


def _sleeping(seconds):
  """A py_function body that holds its thread for `seconds` (no core), then passes x on."""
  return lambda x: (time.sleep(seconds), x)[1]


def _one_executor_thread(proto):
  """`proto` with one executor thread of the session's own: a clone's compute that holds
  it makes every other op wait for that compute (graph clocks around get_next did, and
  counted it as input wait; the 2-clone recipe showed 33-66 %)."""
  proto.inter_op_parallelism_threads = 1
  proto.use_per_session_threads = True
  return proto


HOLD_SECS = 0.5


def hold_the_one_executor_thread(monkeypatch, seconds):
  """train() runs its session on one executor thread, which each clone holds for
  `seconds` once its network has run (a py_function sleep: a thread held, no core used),
  so a step lasts at least num_clones * `seconds` whatever the machine's load."""
  real_network_fn = train_module._network_fn  # pylint: disable=protected-access
  real_session_config = train_module.make_session_config

  def network_fn(setup):
    network = real_network_fn(setup)

    def holding(inputs):
      logits, end_points = network(inputs)
      held = tf.py_function(_sleeping(seconds), [logits], tf.float32)
      with tf.control_dependencies([held]):
        return tf.identity(logits), end_points
    return holding

  def one_thread(*args, **kwargs):
    return _one_executor_thread(real_session_config(*args, **kwargs))

  monkeypatch.setattr(train_module, '_network_fn', network_fn)
  monkeypatch.setattr(train_module, 'make_session_config', one_thread)


@pytest.mark.slow
@pytest.mark.timing
def test_the_two_clone_recipe_counts_its_input_wait_not_its_compute(rgb_dir, tmp_path,
                                                                     monkeypatch):
  """The 2-clone recipe's own trainer, input and videos, with the contrast built in: each
  clone holds the session's one executor thread for 0.5 s, so a step lasts over 1 s while
  its input (threads of tf.data's own) has that second to make the step's two batches of
  tiny clips (milliseconds). No line may count half a clone's hold as input wait: graph
  clocks around get_next, the bug, waited for the held thread and counted the whole step
  (1.07 s of 1.07 on every line), the iterator's own clock counts 0-2 ms. Seconds against
  the holds, not a share against a fixed bound: load only lengthens the holds' steps.
  (1 clone and 2 x 2 micro-batches: test_input_wait_is_the_draws_wait_not_the_clones_compute.)"""
  hold_the_one_executor_thread(monkeypatch, HOLD_SECS)
  train_dir = tmp_path / 'train'
  train_with_timeout(recipe_config(rgb_dir, train_dir))
  scalars = read_events(train_dir)[0]
  step_secs = dict(scalars['sec_per_step'])
  shares = dict(scalars['input/wait_share'])   # every line but the first
  assert len(step_secs) == 4 and len(shares) == 3
  assert all(step_secs[step] >= 2 * HOLD_SECS for step in shares), step_secs  # both held
  waited = {step: share * step_secs[step] for step, share in shares.items()}
  assert sum(wait >= HOLD_SECS / 2 for wait in waited.values()) == 0, waited


@pytest.mark.slow
def test_the_end_marker_says_stopped(digits_dir, tmp_path):
  """A finished run's marker: test_a_run_shows_every_clone_the_input_and_what_it_sees."""
  stopped_dir = tmp_path / 'stopped'
  stop = threading.Event()
  stop.set()  # stopped before the first step: a SIGTERM right after start
  train_with_timeout(make_config(digits_dir, stopped_dir, max_number_of_steps=None),
                     stop_event=stop)
  assert end_marker.read_end_marker(str(stopped_dir)).status == 'stopped'


def _measured_wait(num_clones, num_micro_batches, input_secs, compute_secs, steps=2):
  """(seconds `steps` steps took, seconds InputWait counted) of N clones and K
  micro-batches whose batches take `input_secs` each to make and whose clones compute for
  `compute_secs` each, holding an executor thread while they do."""
  config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensors(tf.ones([2, 3])).repeat()
    if input_secs:
      dataset = dataset.map(lambda x: tf.numpy_function(
          _sleeping(input_secs), [x], tf.float32, stateful=True))
    iterator = tf.data.make_one_shot_iterator(summaries.InputWait.timed(dataset))
    input_wait = summaries.InputWait()

    def model_fn():
      batch = input_wait.draw(iterator)
      weights = tf.get_variable('w', initializer=tf.ones([3]))
      slow = tf.py_function(_sleeping(compute_secs), [batch * weights], tf.float32)
      tf.losses.add_loss(tf.reduce_sum(tf.reshape(slow, [2, 3])) * weights[0])

    model = accumulation.deploy(config, model_fn, num_micro_batches=num_micro_batches,
                                optimizer=tf.train.GradientDescentOptimizer(0.1))
    train_op = input_wait.wrap(model.train_op)
    proto = _one_executor_thread(session_config.make_session_config(config))
    with tf.Session(config=proto) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      start = time.time()
      for _ in range(steps):
        sess.run(train_op)
      return time.time() - start, sess.run(input_wait.total)


@pytest.mark.timing
@pytest.mark.parametrize('num_clones, num_micro_batches', [(1, 1), (2, 1), (2, 2)])
def test_input_wait_is_the_draws_wait_not_the_clones_compute(num_clones,
                                                             num_micro_batches):
  """A pipeline that makes its batches at once waits for nothing, however long the
  clones compute; one that sleeps 0.2 s per batch, against 0.01 s of compute, is waited
  for every sleep. Both counted per draw, for N clones and K micro-batches, and bounded by
  the sleeps themselves (which a loaded machine can only lengthen), not by shares."""
  draws = 2 * num_clones * num_micro_batches   # 2 steps
  elapsed, waited = _measured_wait(num_clones, num_micro_batches, 0, 0.2)
  assert elapsed >= draws * 0.2            # the compute ran, one clone after another ...
  assert 0 <= waited < 0.2                 # ... and not one clone's of it counted as wait
  elapsed, waited = _measured_wait(num_clones, num_micro_batches, 0.2, 0.01)
  assert waited >= draws * 0.2 * 0.9       # every draw's sleep (clock resolution aside) ...
  assert waited <= elapsed                 # ... and no wait counted twice (2 clones' draws)
