"""An --eval_dir read back as TensorBoard reads it (its EventAccumulator), and the eval
figures recomputed in NumPy from logits and labels, independently of evaluation.metrics."""

import io

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read_eval_dir(eval_dir):
  """-> ({scalar tag: [(step, value)]}, {image tag: [(step, PIL image, (height, width))]})."""
  accumulator = EventAccumulator(eval_dir, size_guidance={'scalars': 0, 'images': 0})
  accumulator.Reload()
  tags = accumulator.Tags()
  scalars = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
             for tag in tags['scalars']}
  images = {tag: [(e.step, Image.open(io.BytesIO(e.encoded_image_string)),
                   (e.height, e.width)) for e in accumulator.Images(tag)]
            for tag in tags['images']}
  return scalars, images


def numpy_figures(logits, labels, num_classes):
  """top1, top5 (and their counts top1_correct, top5_correct), per-class accuracy (NaN for a class without examples), mean class
  accuracy and confusion, from argmax and argsort."""
  logits, labels = np.asarray(logits), np.asarray(labels)
  predicted = np.argmax(logits, axis=1)
  best5 = np.argsort(-logits, axis=1, kind='stable')[:, :5]
  per_class = np.array([np.mean(predicted[labels == c] == c) if np.any(labels == c)
                        else np.nan for c in range(num_classes)])
  confusion = np.zeros((num_classes, num_classes), np.int64)
  for label, guess in zip(labels, predicted):
    confusion[label, guess] += 1
  top1_correct = int(np.sum(predicted == labels))
  top5_correct = sum(int(l in row) for l, row in zip(labels, best5))
  return {'top1': top1_correct / len(labels), 'top5': top5_correct / len(labels),
          'top1_correct': top1_correct, 'top5_correct': top5_correct,
          'per_class': per_class, 'mean_class_accuracy': float(np.nanmean(per_class)),
          'confusion': confusion}


def assert_stream_events(scalars, images, stream, step, expected, class_tags):
  """The scalars and the image of one stream, at `step`, against `expected`
  (numpy_figures); class_tags: the per-class tag component of each class."""
  for name in ('top1', 'top5', 'mean_class_accuracy'):
    [(at, value)] = scalars['eval/%s/%s' % (stream, name)]
    assert at == step and abs(value - expected[name]) < 1e-6, (stream, name, value)
  for name in ('top1_correct', 'top5_correct'):
    assert scalars['eval/%s/%s' % (stream, name)] == [(step, expected[name])]
  per_class = {tag[len('per_class_accuracy/%s/' % stream):]: values
               for tag, values in scalars.items()
               if tag.startswith('per_class_accuracy/%s/' % stream)}
  wanted = {tag: accuracy for tag, accuracy in zip(class_tags, expected['per_class'])
            if not np.isnan(accuracy)}
  assert sorted(per_class) == sorted(wanted)
  for tag, accuracy in wanted.items():
    [(at, value)] = per_class[tag]
    assert at == step and abs(value - accuracy) < 1e-6, (stream, tag, value, accuracy)
  [(at, image, (height, width))] = images['eval/%s/confusion_matrix' % stream]
  assert at == step and image.format == 'PNG' and image.size == (width, height)
  return image
