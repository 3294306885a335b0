"""evaluation.metrics against plain-Python counting, example by example."""

import numpy as np
import pytest

from evaluation.metrics import (accuracy_text, classification_metrics, confusion_matrix,
                                reaches, top_k_correct)


def python_metrics(scores, labels, num_classes):
  """Reference: sort each row by (-score, class) and count by hand."""
  ranked = [sorted(range(num_classes), key=lambda c, row=row: (-row[c], c)) for row in scores]
  top1 = [r[0] == label for r, label in zip(ranked, labels)]
  top5 = [label in r[:5] for r, label in zip(ranked, labels)]
  confusion = [[0] * num_classes for _ in range(num_classes)]
  for r, label in zip(ranked, labels):
    confusion[label][r[0]] += 1
  per_class = []
  for c in range(num_classes):
    hits = [t for t, label in zip(top1, labels) if label == c]
    per_class.append(sum(hits) / len(hits) if hits else float('nan'))
  present = [a for a in per_class if a == a]
  return (sum(top1), sum(top5), per_class, sum(present) / len(present), confusion)


@pytest.mark.parametrize('seed,num_classes,count', [(0, 3, 7), (1, 10, 50), (2, 101, 300)])
def test_against_python_counting(seed, num_classes, count):
  rng = np.random.RandomState(seed)
  scores = rng.normal(size=(count, num_classes)).astype(np.float32)
  labels = rng.randint(0, num_classes, count)
  scores[np.arange(count) % 3 == 0, labels[np.arange(count) % 3 == 0]] += 2.0  # some hits
  top1, top5, per_class, mean_class, confusion = python_metrics(scores, labels, num_classes)
  metrics = classification_metrics(scores, labels, num_classes)
  assert metrics.num_examples == count
  assert (metrics.top1_correct, metrics.top5_correct) == (top1, top5)
  assert metrics.top1 == top1 / count and metrics.top5 == top5 / count
  np.testing.assert_allclose(metrics.per_class_accuracy, per_class)  # NaN where absent
  assert metrics.mean_class_accuracy == pytest.approx(mean_class)
  assert metrics.confusion.tolist() == confusion
  assert metrics.class_counts.tolist() == [int(np.sum(labels == c)) for c in range(num_classes)]
  assert metrics.confusion.trace() == top1


def test_ties_go_to_the_lower_class_as_argmax_does():
  scores = np.zeros((3, 6))
  labels = np.array([0, 4, 5])
  assert top_k_correct(scores, labels, 1).tolist() == [True, False, False]
  assert top_k_correct(scores, labels, 5).tolist() == [True, True, False]
  metrics = classification_metrics(scores, labels, 6)
  assert metrics.confusion[:, 0].sum() == 3


def test_mean_class_accuracy_weights_classes_not_examples():
  # Class 0: 9 of 9 right; class 1: 0 of 1 right -> top-1 0.9, mean class 0.5.
  scores = np.array([[1.0, 0.0]] * 10)
  labels = np.array([0] * 9 + [1])
  metrics = classification_metrics(scores, labels, 2)
  assert metrics.top1 == pytest.approx(0.9)
  assert metrics.mean_class_accuracy == pytest.approx(0.5)
  assert metrics.top5 == 1.0  # fewer classes than 5: top-5 is top-2


def test_confusion_matrix_counts_pairs():
  assert confusion_matrix(np.array([0, 0, 1, 2]), np.array([0, 2, 1, 2]), 3).tolist() == [
      [1, 0, 1], [0, 1, 0], [0, 0, 1]]


@pytest.mark.parametrize('scores,labels,message', [
    (np.zeros((0, 3)), np.zeros(0, np.int64), 'no examples'),
    (np.zeros((2, 3)), np.array([0, 3]), 'labels must be in 0..2'),
    (np.zeros((2, 4)), np.array([0, 1]), 'do not describe'),
])
def test_bad_input(scores, labels, message):
  with pytest.raises(ValueError, match=message):
    classification_metrics(scores, labels, 3)


def test_exactly_342_of_360_reaches_095_counted_not_as_a_float32_ratio():
  assert float(np.float32(342 / 360)) < 0.95     # the trap: 0.949999988079071
  assert reaches(342, 360, 0.95)
  assert not reaches(341, 360, 0.95)
  assert reaches(19, 20, 0.95) and reaches(1, 3, 1 / 3) and not reaches(0, 3, 0.001)
  assert reaches(0, 5, 0.0) and reaches(5, 5, 1.0) and not reaches(4, 5, 1.0)
  assert accuracy_text(342, 360) == '0.9500 (342/360)'
