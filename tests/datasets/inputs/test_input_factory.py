"""Tests of datasets/inputs/input_factory.py: one input per kind of data, no branches."""

import ast
import os

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import clip_decode, input_factory, label_strip
from datasets.inputs.input_factory import IMAGE, VIDEO, InputSettings
from tests.datasets.inputs.test_label_strip import read_label
from tests.evaluation.tensorboard_events import read_eval_dir
from tf_compat import tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_one_input_per_kind_and_unknown_kinds_list_the_valid_ones():
  assert input_factory.list_inputs() == [IMAGE, VIDEO]
  assert input_factory.get_input(IMAGE).kind == IMAGE
  assert input_factory.get_input(VIDEO).kind == VIDEO
  with pytest.raises(ValueError, match="no input for 'audio'; valid: image, video"):
    input_factory.get_input('audio')
  with pytest.raises(ValueError, match="an input for 'image' is already registered"):
    input_factory.register_input(input_factory.ImageInput())


def test_a_split_names_its_own_input(digits_dir):
  split = dataset_factory.get_dataset('digits', 'train', digits_dir)
  assert split.kind == IMAGE
  assert input_factory.get_input(split.kind).kind == IMAGE


def test_image_batches_pass_the_clone_unchanged(digits_dir):
  split = dataset_factory.get_dataset('digits', 'train', digits_dir)
  pipeline = input_factory.get_input(IMAGE)
  settings = InputSettings(batch_size=4, image_size=28, preprocessing_name='lenet')
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(pipeline.dataset(split, settings)).get_next()
    images, labels = pipeline.finish(batch, split)
    assert images is batch[0] and labels is batch[1]
    with tf.Session() as sess:
      images, labels = sess.run([images, labels])
  assert images.shape == (4, 28, 28, 1) and labels.shape == (4,)
  assert pipeline.describe(settings, split) == '28x28 images (lenet preprocessing)'


def test_clips_are_finished_on_the_clone_as_finish_clips_does():
  split = dataset_factory.DatasetSplit(
      name='video_folder', split_name='train', dataset_dir='', file_pattern='',
      num_samples=1, num_classes=2, labels_to_names={}, num_channels=2, modality='flow')
  pipeline = input_factory.get_input(split.kind)
  clips = np.random.RandomState(0).randint(0, 256, (2, 3, 4, 4, 2)).astype(np.uint8)
  flips = np.array([True, False])
  with tf.Graph().as_default():
    finished, labels = pipeline.finish(
        (tf.constant(clips), tf.constant([1, 0]), tf.constant(flips)), split)
    expected = clip_decode.finish_clips(tf.constant(clips), 'flow', tf.constant(flips))
    with tf.Session() as sess:
      finished, expected, labels = sess.run([finished, expected, labels])
  np.testing.assert_array_equal(finished, expected)
  assert finished.dtype == np.float32 and list(labels) == [1, 0]
  settings = InputSettings(batch_size=2, image_size=4, clip_frames=3, repeat_first_frame=True)
  assert pipeline.describe(settings, split) == (
      '3x4x4 flow clips (first frame repeated: no motion)')


@pytest.mark.parametrize('path', ['training/train.py', 'evaluation/run.py'])
def test_the_trainer_and_eval_do_not_branch_on_the_kind_of_data(path):
  with open(os.path.join(REPO, path)) as handle:
    tree = ast.parse(handle.read())
  tests = [ast.unparse(node.test) for node in ast.walk(tree) if isinstance(node, ast.If)]
  assert not [test for test in tests
              if any(word in test for word in ('clip_frames', 'is_video', 'modality', 'kind'))]


def test_the_clip_montages_written_carry_their_class(tmp_path):
  """Read back as TensorBoard reads it: each montage under its clip's class, the frames
  below as the clips hold them (5 frames, all shown), the tag as before."""
  split = dataset_factory.DatasetSplit(
      name='video_folder', split_name='train', dataset_dir='', file_pattern='',
      num_samples=3, num_classes=3, labels_to_names={0: 'archery', 1: 'bowling', 2: 'diving'},
      num_channels=3, modality='rgb')
  settings = InputSettings(batch_size=3, image_size=16, clip_frames=5)
  clips = np.random.RandomState(0).uniform(-1, 1, (3, 5, 16, 16, 3)).astype(np.float32)
  with tf.Graph().as_default():
    input_factory.get_input(VIDEO).summarize(tf.constant(clips), tf.constant([2, 0, 1]),
                                             split, settings)
    with tf.Session() as sess:
      summary = sess.run(tf.summary.merge_all())
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(summary, global_step=4)
    writer.close()
  _, images = read_eval_dir(str(tmp_path))
  assert sorted(images) == ['input/clips/image/0', 'input/clips/image/1']
  for index, name in enumerate(['2: diving', '0: archery']):
    [(step, image, size)] = images['input/clips/image/%d' % index]
    pixels = np.asarray(image.convert('RGB'))
    assert step == 4 and size == (label_strip.GLYPH_HEIGHT + 16, 5 * 16)
    assert read_label(pixels) == name
    montage = np.concatenate(list(np.round((clips[index] + 1) * 127.5)), axis=1)
    np.testing.assert_array_equal(pixels[label_strip.GLYPH_HEIGHT:], montage)


@pytest.mark.parametrize('kind', [IMAGE, VIDEO])
def test_every_input_has_an_evaluation_mode(kind):
  pipeline = input_factory.get_input(kind)
  assert pipeline.unit in ('images', 'videos') and callable(pipeline.eval_dataset)


def test_image_evaluation_reports_each_image_once_with_where_it_is(digits_dir):
  split = dataset_factory.get_dataset('digits', 'test', digits_dir)
  settings = InputSettings(batch_size=64, image_size=28, preprocessing_name='lenet',
                           num_epochs=1, drop_remainder=False)
  with tf.Graph().as_default(), tf.Session() as sess:
    batch = tf.data.make_one_shot_iterator(
        input_factory.get_input(IMAGE).eval_dataset(split, settings)).get_next()
    where, damage = [], []
    while True:
      try:
        _, _, batch_where, batch_damage = sess.run(batch)
      except tf.errors.OutOfRangeError:
        break
      where += list(batch_where)
      damage += list(batch_damage)
  assert len(where) == len(set(where)) == split.num_samples
  assert all(item.startswith(b'record ') for item in where) and set(damage) == {b''}
