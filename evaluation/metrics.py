"""Classification metrics of per-video scores, in NumPy: top-k, per-class, confusion.

    metrics = classification_metrics(logits, labels, num_classes)
    metrics.top1, metrics.top5, metrics.mean_class_accuracy, metrics.confusion

Ties are broken towards the lower class index, as argmax does: the top k are the first k
classes of a stable sort by decreasing score. So top-1 is exactly the confusion matrix's
diagonal share. Accuracies are counts first: `top1_correct` of `num_examples`; the ratios
are made from them, `accuracy_text` shows both ('0.9500 (342/360)') and `reaches` compares
counts with a threshold read as the decimal it was typed as, so exactly 342 of 360 reaches
0.95 (a float32 ratio, 0.94999999, would not).
"""

import dataclasses
import fractions

import numpy as np

__all__ = ['ClassificationMetrics', 'classification_metrics', 'top_k_correct',
           'confusion_matrix', 'accuracy_text', 'reaches']


@dataclasses.dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous.
class ClassificationMetrics:
  """Metrics of N scored examples over C classes.

  Attributes:
    num_examples: N.
    top1_correct, top5_correct: examples whose label is among the 1 (5) best-scored
      classes; top 5 is top C when C < 5.
    top1, top5: those counts / N.
    per_class_accuracy: float64 [C], top-1 accuracy of the examples of each class; NaN
      for a class without examples.
    mean_class_accuracy: mean of per_class_accuracy over the classes with examples.
    class_counts: int64 [C], examples per class.
    confusion: int64 [C, C], confusion[true, predicted] counts (predicted = argmax).
  """
  num_examples: int
  top1_correct: int
  top5_correct: int
  top1: float
  top5: float
  per_class_accuracy: np.ndarray
  mean_class_accuracy: float
  class_counts: np.ndarray
  confusion: np.ndarray


def top_k_correct(scores, labels, k):
  """bool [N]: the label is among the k best classes (ties: lower index first).

  Args:
    scores: float [N, C]; labels: int [N] in 0..C-1.
  """
  label_scores = scores[np.arange(len(labels)), labels][:, None]
  classes = np.arange(scores.shape[1])[None, :]
  ahead = (scores > label_scores) | ((scores == label_scores) & (classes < labels[:, None]))
  return np.sum(ahead, axis=1) < k


def confusion_matrix(labels, predictions, num_classes):
  """int64 [C, C]: entry [i, j] counts examples of class i predicted as j."""
  matrix = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(matrix, (labels, predictions), 1)
  return matrix


def classification_metrics(scores, labels, num_classes):
  """Metrics of `scores` float [N, C] (logits or probabilities) against `labels` int [N].

  Raises:
    ValueError: no examples, shapes that disagree, or labels outside 0..C-1.
  """
  scores = np.asarray(scores, np.float64)
  labels = np.asarray(labels, np.int64)
  if scores.ndim != 2 or scores.shape[1] != num_classes or len(labels) != len(scores):
    raise ValueError('scores %s and labels %s do not describe N examples of %d classes'
                     % (scores.shape, labels.shape, num_classes))
  if not len(labels):
    raise ValueError('no examples to score')
  if labels.min() < 0 or labels.max() >= num_classes:
    raise ValueError('labels must be in 0..%d, got %d..%d'
                     % (num_classes - 1, labels.min(), labels.max()))
  top1 = top_k_correct(scores, labels, 1)
  counts = np.bincount(labels, minlength=num_classes)
  hits = np.bincount(labels, weights=top1, minlength=num_classes)
  with np.errstate(invalid='ignore', divide='ignore'):
    per_class = np.where(counts > 0, hits / np.maximum(counts, 1), np.nan)
  top1_correct = int(np.sum(top1))
  top5_correct = int(np.sum(top_k_correct(scores, labels, 5)))
  return ClassificationMetrics(
      num_examples=len(labels), top1_correct=top1_correct, top5_correct=top5_correct,
      top1=top1_correct / len(labels), top5=top5_correct / len(labels),
      per_class_accuracy=per_class, mean_class_accuracy=float(np.nanmean(per_class)),
      class_counts=counts.astype(np.int64),
      confusion=confusion_matrix(labels, np.argmax(scores, axis=1), num_classes))


def accuracy_text(correct, total):
  """'0.9500 (342/360)': the ratio with the counts it comes from."""
  return '%.4f (%d/%d)' % (correct / total if total else float('nan'), correct, total)


def reaches(correct, total, threshold):
  """Whether `correct` of `total` is at least `threshold` (a float flag), compared in
  integers: the threshold as the shortest decimal that prints as it (0.95 -> 19/20), so
  342 of 360 reaches 0.95."""
  exact = fractions.Fraction(repr(float(threshold)))
  return correct * exact.denominator >= exact.numerator * total
