"""Tests of datasets/inputs/input_factory.py: one input per kind of data, no branches."""

import ast
import os

import numpy as np
import pytest

from datasets import dataset_factory
from datasets.inputs import clip_input, input_factory
from datasets.inputs.input_factory import IMAGE, VIDEO, InputSettings
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
    expected = clip_input.finish_clips(tf.constant(clips), 'flow', tf.constant(flips))
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
