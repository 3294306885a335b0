"""The tf.data input of image classifiers: shards -> parsed, preprocessed, batched images.

The caller makes the iterator (`tf.data.make_one_shot_iterator` or an initializable one)
and chooses the device, normally the CPU of the worker:

    with tf.device('/job:worker/task:0/cpu:0'):
      dataset = build_image_dataset(split, batch_size=32, image_size=28,
                                    preprocessing_name='lenet', is_training=True)
      images, labels = tf.data.make_one_shot_iterator(dataset).get_next()
"""

from datasets import image_preprocessing
from datasets import image_records
from tf_compat import tf


def _check_positive(**values):
  for name, value in values.items():
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise ValueError('%s=%r is not accepted: use a positive integer' % (name, value))


def _check_arguments(split, num_epochs, num_shards, shard_index, labels_offset):
  if num_epochs is not None:
    _check_positive(num_epochs=num_epochs)
  if not isinstance(shard_index, int) or not 0 <= shard_index < num_shards:
    raise ValueError('shard_index=%r is not accepted: use 0..%d for num_shards=%d'
                     % (shard_index, num_shards - 1, num_shards))
  if not isinstance(labels_offset, int) or not 0 <= labels_offset < split.num_classes:
    raise ValueError('labels_offset=%r is not accepted: use 0..%d (%s has %d classes)'
                     % (labels_offset, split.num_classes - 1, split.name, split.num_classes))


def _input_files(split, num_shards, shard_index):
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


def build_image_dataset(split, *, batch_size, image_size, preprocessing_name, is_training,
                        num_readers=4, num_preprocessing_threads=4, shuffle_buffer_size=1000,
                        num_epochs=None, drop_remainder=True, seed=None, num_shards=1,
                        shard_index=0, labels_offset=0, prefetch_batches=2):
  """Builds the dataset of (images, labels) batches of one split.

  Pipeline: shard files (a disjoint subset per shard_index) -> shuffled file order when
  training -> parallel interleave of TFRecord readers -> example shuffle when training ->
  repeat -> parse, decode and preprocess in one parallel map -> batch -> prefetch.

  Args:
    split: a DatasetSplit.
    batch_size: images per batch.
    image_size: output height and width.
    preprocessing_name: a name from image_preprocessing.list_preprocessing().
    is_training: training shuffles and uses the random (augmenting) preprocessing.
    num_readers: shard files read at once.
    num_preprocessing_threads: parallel decode + preprocess calls.
    shuffle_buffer_size: examples in the shuffle buffer (training only).
    num_epochs: passes over the data; None repeats forever (training). Evaluation passes 1.
    drop_remainder: drop a last partial batch, giving a static batch dimension.
    seed: shuffle seed. With a seed, or when not training, the order is deterministic;
      training without a seed lets tf.data return elements as soon as they are ready.
    num_shards, shard_index: keep every num_shards-th file starting at shard_index, so
      cluster workers read disjoint files. Needs at least num_shards files.
    labels_offset: subtracted from every label (e.g. 1 to drop a background class 0).
    prefetch_batches: batches prepared ahead of the consumer.

  Returns:
    tf.data.Dataset of (images float32 [batch, image_size, image_size, C],
    labels int64 [batch]); batch is static when drop_remainder is True.
  """
  _check_positive(batch_size=batch_size, image_size=image_size, num_readers=num_readers,
                  prefetch_batches=prefetch_batches,
                  num_preprocessing_threads=num_preprocessing_threads,
                  shuffle_buffer_size=shuffle_buffer_size, num_shards=num_shards)
  _check_arguments(split, num_epochs, num_shards, shard_index, labels_offset)
  preprocess = image_preprocessing.get_preprocessing(preprocessing_name, is_training)
  files = _input_files(split, num_shards, shard_index)

  def parse_and_preprocess(serialized):
    image, label = image_records.parse_image_example(serialized, split.num_channels)
    return preprocess(image, image_size, image_size), label - labels_offset

  dataset = read_records(files, is_training, num_readers, shuffle_buffer_size, seed)
  dataset = dataset.repeat(num_epochs)
  dataset = dataset.map(parse_and_preprocess, num_parallel_calls=num_preprocessing_threads)
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.prefetch(prefetch_batches)
  return dataset.with_options(pipeline_options(deterministic=not is_training or
                                               seed is not None))


def read_records(files, is_training, num_readers, shuffle_buffer_size, seed):
  """Serialized records of `files`: parallel interleave of TFRecord readers, file order
  and records shuffled when training. Shared by the image and the clip pipelines."""
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if is_training:
    dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  readers = min(num_readers, len(files))
  dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=readers, block_length=1,
                               num_parallel_calls=readers)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
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
