"""Decoding stored bytes that may be damaged, past the values that fail to decode.

One value that does not decode (a JPEG cut short inside a record whose CRC is fine) makes
its op fail, and one failing op ends a tf.data pipeline. Here the values are decoded in
one loop inside a one-element dataset with errors ignored, and, only when that fails, each
as an element of a small dataset of its own, so the result carries a flag per value. The
readers (`inputs/damaged_frames`, `clip_input`, `image_input`) and the verifier
(`checks/verify_records`) both decode through it.

  map_checked(values, fn, ...)   fn on each row of `values`, carrying on past rows it fails
                                 on: (outputs, zeros where it failed; ok bool per row)
  decode_or_blank(value, fn, ..) the same for one value (a whole image, any size)
"""

from tf_compat import tf

__all__ = ['map_checked', 'decode_or_blank']


def map_checked(values, fn, output_shape, dtype, num_parallel_calls=None):
  """Applies `fn` to each row of `values`; a row `fn` fails on gives zeros and ok False.

  First every row in one loop (`tf.map_fn`), inside a one-element dataset whose errors are
  ignored: when nothing fails, as almost always, that is all. Only when something fails
  does each row become an element of a nested dataset of its own (`_row_by_row`), so the
  failure costs that row only. The loop costs 10 % less CPU per clip than the rows as
  dataset elements (docs/benchmarks.md), and a damaged clip pays for both.

  Args:
    values: a tensor [N, ...] (e.g. string [N] JPEGs, or [N, 2] flow u, v pairs).
    fn: one row -> a tensor of `output_shape` and `dtype`.
    output_shape: the static shape of fn's output (a list of ints).
    dtype: fn's output dtype.
    num_parallel_calls: rows computed at once (None: one after the other).

  Returns:
    (outputs `dtype` [N] + output_shape, zeros in the rows that failed;
     ok bool [N], True where `fn` succeeded).
  """
  def every_row(rows):
    outputs = tf.map_fn(lambda row: tf.ensure_shape(fn(row), output_shape), rows,
                        fn_output_signature=tf.TensorSpec(output_shape, dtype),
                        parallel_iterations=num_parallel_calls or 1)
    return outputs, tf.ones([tf.shape(rows)[0]], tf.bool)

  def row_by_row(rows):
    return _row_by_row(rows, fn, output_shape, dtype, num_parallel_calls)

  whole = tf.data.Dataset.from_tensors(values)
  # concatenate is lazy: the rows one by one run only when the loop failed.
  outputs, ok = whole.map(every_row).ignore_errors().concatenate(
      whole.map(row_by_row)).take(1).get_single_element()
  outputs.set_shape([None] + list(output_shape))
  return outputs, ok


def _row_by_row(values, fn, output_shape, dtype, num_parallel_calls):
  """map_checked's outputs, each row an element of a dataset whose errors are ignored."""
  count = tf.shape(values)[0]
  rows = tf.data.Dataset.from_tensor_slices((values, tf.range(count)))
  rows = rows.map(lambda value, index: (tf.ensure_shape(fn(value), output_shape), index),
                  num_parallel_calls=num_parallel_calls).ignore_errors()
  # When every row failed the batch is missing: an empty one stands in for it.
  empty = tf.data.Dataset.from_tensors((tf.zeros([0] + list(output_shape), dtype),
                                        tf.zeros([0], tf.int32)))
  outputs, kept = rows.batch(tf.cast(tf.maximum(count, 1), tf.int64)).concatenate(
      empty).take(1).get_single_element()
  ok = tf.scatter_nd(kept[:, None], tf.ones_like(kept, tf.bool), [count])
  full_shape = tf.concat([[count], tf.constant(output_shape, tf.int32)], 0)
  outputs = tf.cond(tf.equal(tf.size(kept), count), lambda: outputs,
                    lambda: tf.scatter_nd(kept[:, None], outputs, full_shape))
  outputs.set_shape([None] + list(output_shape))
  return outputs, ok


def decode_or_blank(value, fn, blank):
  """(fn(value), True), or (blank, False) when an op inside `fn` fails on `value` (the
  one-element form of map_checked, for outputs of any shape, e.g. whole images)."""
  tried = tf.data.Dataset.from_tensors(value).map(
      lambda v: (fn(v), tf.constant(True))).ignore_errors()
  fallback = tf.data.Dataset.from_tensors((blank, tf.constant(False)))
  return tried.concatenate(fallback).take(1).get_single_element()
