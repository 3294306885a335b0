"""evaluation.summaries: the tags an evaluation writes, read back with TensorBoard's
reader, for metrics made up here (evaluation/test_image_eval.py and test_video_eval.py
check them on real evaluations)."""

import os

import numpy as np
import pytest

from evaluation import summaries
from evaluation.metrics import classification_metrics
from tests.evaluation import tensorboard_events as tbe


@pytest.mark.parametrize('names,tags', [
    (['ApplyEyeMakeup', 'brush_hair', 'Yo-Yo.2'], ['ApplyEyeMakeup', 'brush_hair', 'Yo-Yo.2']),
    (['ride horse', 'cut/slice', 'café'], ['ride_horse', 'cut_slice', 'café']),
    (['', 'a b', 'a_b', 'c'], ['class_0', 'a_b_1', 'a_b_2', 'c']),
])
def test_class_tags_are_sanitised_unique_and_never_empty(names, tags):
  assert summaries.class_tags(names) == tags


def test_every_stream_every_class_one_event(tmp_path):
  """Two streams of 4 classes; class 3 has no example in the split: no value for it."""
  rng = np.random.RandomState(0)
  labels = np.array([0, 0, 1, 1, 1, 2, 2, 0, 1, 2])
  logits = {name: rng.normal(size=(len(labels), 4)) for name in ('rgb', 'flow')}
  streams = [summaries.StreamMetrics(name, classification_metrics(logits[name], labels, 4),
                                     'videos') for name in ('rgb', 'flow')]
  names = ['walk', 'run fast', 'jump', 'sit']
  eval_dir = str(tmp_path / 'eval')
  paths = summaries.write_summaries(eval_dir, 12, streams, names, '12',
                                    extra_scalars={'eval/extra': 0.5})
  assert paths == [os.path.join(eval_dir, 'confusion-12-%s.png' % s) for s in ('rgb', 'flow')]
  assert all(os.path.getsize(path) > 1000 for path in paths)
  assert not [name for name in os.listdir(eval_dir) if name.endswith('.tmp')]
  scalars, images = tbe.read_eval_dir(eval_dir)
  for name in ('rgb', 'flow'):
    tbe.assert_stream_events(scalars, images, name, 12,
                             tbe.numpy_figures(logits[name], labels, 4),
                             ['walk', 'run_fast', 'jump', 'sit'])
    assert 'per_class_accuracy/%s/sit' % name not in scalars
    assert scalars['eval/%s/examples' % name] == [(12, 10)]
  assert scalars['eval/extra'] == [(12, 0.5)]
  # Per stream: top1, top5, mean class, the two counts and the examples; 3 classes.
  assert len(scalars) == 2 * (6 + 3) + 1 and len(images) == 2
