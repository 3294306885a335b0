"""What the image and the clip input pipelines share: argument checks, the shard files of
a split (a disjoint subset per cluster worker), the record reader, the tf.data options
and the batches at the pipeline's end (`batched`).
"""

from datasets.inputs import service_client
from tf_compat import tf


def as_written(fn):
  """`fn`, for a tf.data transformation, traced as written: without AutoGraph's rewrite,
  and so are the functions of the datasets built inside it.

  The pipelines' functions use tf.cond and tf.where themselves, so the rewrite changes
  nothing in them, and it cost 7 of the 64 s of a reduced I3D run's start under cProfile
  (the clip map function and the 23 functions it calls, parsed and transformed in every
  process that builds the pipeline).
  """
  return tf.autograph.experimental.do_not_convert(fn)


def check_positive(**values):
  """Each keyword argument must be an int >= 1; ValueError names the first that is not."""
  for name, value in values.items():
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise ValueError('%s=%r is not accepted: use a positive integer' % (name, value))


def check_arguments(split, num_epochs, num_shards, shard_index, labels_offset):
  """The arguments every pipeline takes, checked against the split."""
  if num_epochs is not None:
    check_positive(num_epochs=num_epochs)
  if not isinstance(shard_index, int) or not 0 <= shard_index < num_shards:
    raise ValueError('shard_index=%r is not accepted: use 0..%d for num_shards=%d'
                     % (shard_index, num_shards - 1, num_shards))
  if not isinstance(labels_offset, int) or not 0 <= labels_offset < split.num_classes:
    raise ValueError('labels_offset=%r is not accepted: use 0..%d (%s has %d classes)'
                     % (labels_offset, split.num_classes - 1, split.name, split.num_classes))


def input_files(split, num_shards, shard_index):
  """The sorted shard files of `split`, every num_shards-th one from shard_index."""
  files = sorted(tf.io.gfile.glob(split.file_pattern))
  if not files:
    raise ValueError('no files match %s; re-run the conversion of %s'
                     % (split.file_pattern, split.name))
  if len(files) < num_shards:
    raise ValueError('num_shards=%d input shards (one per worker) need at least as many files,'
                     ' but %s %s has %d; convert with --num_shards>=%d or use fewer workers'
                     % (num_shards, split.name, split.split_name, len(files), num_shards))
  return files[shard_index::num_shards]


def read_records(files, settings, is_training, shuffle_buffer_size, with_origin=False,
                 reader=tf.data.TFRecordDataset):
  """Serialized records of `files`: parallel interleave of settings.num_readers TFRecord
  readers, file order and records shuffled (settings.seed) when training, in a buffer of
  `shuffle_buffer_size` (the pipeline's, resolved). with_origin: each element is (record,
  the path of its file, its number in the file from 0), so what is wrong with a record
  can name it. `reader`: file path -> dataset of its elements (the video input reads each
  shard's index this way). settings.service: the trainer's ServiceSettings when the
  tf.data service runs the pipeline (its files sharding keeps each data worker to its
  own files), or None."""
  dataset = service_client.shard_hint(tf.data.Dataset.from_tensor_slices(files),
                                      settings.service)
  if is_training:
    dataset = dataset.shuffle(len(files), seed=settings.seed, reshuffle_each_iteration=True)
  readers = min(settings.num_readers, len(files))
  read = reader
  if with_origin:
    read = lambda path: reader(path).enumerate().map(
        lambda index, record: (record, path, index))
  dataset = dataset.interleave(as_written(read), cycle_length=readers, block_length=1,
                               num_parallel_calls=readers)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=settings.seed,
                              reshuffle_each_iteration=True)
  return dataset


def pipeline_options(deterministic):
  """tf.data options for every input pipeline here.

  Autotuning is off: parallelism and buffers are explicit arguments, and tf.data's
  autotune thread made `Session.close()` wait 6 to 15 s at the end of a 2-clone run on
  this machine (0.01 s without it). Non-deterministic order lets tf.data return ready
  elements first when the order is random anyway.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  options.deterministic = deterministic
  return options


def batched(dataset, settings, is_training):
  """`dataset`'s elements in batches of settings.batch_size (static when drop_remainder),
  settings.prefetch_batches ahead, with `pipeline_options`: the order is deterministic
  unless training without a seed. The end of every input pipeline here."""
  dataset = dataset.batch(settings.batch_size, drop_remainder=settings.drop_remainder)
  dataset = dataset.prefetch(settings.prefetch_batches)
  return dataset.with_options(pipeline_options(
      deterministic=not is_training or settings.seed is not None))
