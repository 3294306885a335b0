"""A seeded, stratified train/test assignment, identical on every run and machine."""

import numpy as np


def _test_quotas(counts, num_test):
  """Test examples per class: proportional, rounded by largest remainder to sum num_test.

  A class only gets a rounded-up unit if it keeps at least one training example, so the
  total can fall short of num_test when classes are tiny. Integer arithmetic keeps the
  result exact and independent of floating point.
  """
  total = int(sum(counts))
  quotas = [int(count) * num_test // total for count in counts]
  remainders = [int(count) * num_test % total for count in counts]
  extra = num_test - sum(quotas)
  order = sorted(range(len(counts)), key=lambda c: (-remainders[c], c))
  eligible = [c for c in order if remainders[c] and quotas[c] + 1 < counts[c]]
  for c in eligible[:extra]:
    quotas[c] += 1
  return quotas


def stratified_split(labels, num_test, seed):
  """Splits example indices into train and test, keeping class proportions.

  Uses numpy's legacy RandomState, whose stream numpy guarantees never changes, so a seed
  names the same split on every numpy version.

  Args:
    labels: sequence of n class labels (any sortable values).
    num_test: number of test examples wanted, 0..n.
    seed: int seed of the permutation.

  Returns:
    (train_indices, test_indices): int64 arrays, disjoint, covering range(n), each in the
    seeded random order (so writing records in this order mixes the classes).
  """
  labels = np.asarray(labels)
  if not 0 <= num_test <= len(labels):
    raise ValueError('num_test=%d is not accepted for %d examples' % (num_test, len(labels)))
  order = np.random.RandomState(seed).permutation(len(labels)).astype(np.int64)
  if len(labels) == 0:
    return order, order
  classes, class_ids, counts = np.unique(labels, return_inverse=True, return_counts=True)
  quotas = _test_quotas(list(counts), num_test)
  taken = [0] * len(classes)
  in_test = np.zeros(len(labels), dtype=bool)
  for index in order:
    class_id = class_ids[index]
    if taken[class_id] < quotas[class_id]:
      in_test[index] = True
      taken[class_id] += 1
  return order[~in_test[order]], order[in_test[order]]
