"""The tf.data input of image classifiers: shards -> parsed, preprocessed, batched images.

The caller makes the iterator (`tf.data.make_one_shot_iterator` or an initializable one)
and chooses the device, normally the CPU of the worker:

    with tf.device('/job:worker/task:0/cpu:0'):
      dataset = build_image_dataset(split, batch_size=32, image_size=28,
                                    preprocessing_name='lenet', is_training=True)
      images, labels = tf.data.make_one_shot_iterator(dataset).get_next()
"""

from datasets.formats import checked_decode, image_records
from datasets.inputs import image_preprocessing, record_files
from tf_compat import tf


def build_image_dataset(split, *, batch_size, image_size, preprocessing_name, is_training,
                        num_readers=4, num_preprocessing_threads=4, shuffle_buffer_size=1000,
                        num_epochs=None, drop_remainder=True, seed=None, num_shards=1,
                        shard_index=0, labels_offset=0, prefetch_batches=2,
                        report_damaged=False, service=None):
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
    report_damaged: evaluation: each element ends with where string [batch] ('record N of
      <shard file>') and damage string [batch] ('' or why the image could not be used: it
      does not decode; its image is then a blank one). Without it such an image fails
      the pipeline. service: ServiceSettings when the tf.data service runs it, or None.

  Returns:
    tf.data.Dataset of (images float32 [batch, image_size, image_size, C],
    labels int64 [batch][, where, damage]); batch is static when drop_remainder is True.
  """
  record_files.check_positive(batch_size=batch_size, image_size=image_size, num_readers=num_readers,
                  prefetch_batches=prefetch_batches,
                  num_preprocessing_threads=num_preprocessing_threads,
                  shuffle_buffer_size=shuffle_buffer_size, num_shards=num_shards)
  record_files.check_arguments(split, num_epochs, num_shards, shard_index, labels_offset)
  preprocess = image_preprocessing.get_preprocessing(preprocessing_name, is_training)
  files = record_files.input_files(split, num_shards, shard_index)

  def parse_and_preprocess(serialized, *origin):
    if not report_damaged:
      image, label = image_records.parse_image_example(serialized, split.num_channels)
      return preprocess(image, image_size, image_size), label - labels_offset
    image, label, where, damage = _parse_checked(serialized, split.num_channels, *origin)
    return preprocess(image, image_size, image_size), label - labels_offset, where, damage

  dataset = record_files.read_records(files, is_training, num_readers, shuffle_buffer_size,
                                      seed, with_origin=report_damaged, service=service)
  dataset = dataset.repeat(num_epochs)
  dataset = dataset.map(parse_and_preprocess, num_parallel_calls=num_preprocessing_threads)
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.prefetch(prefetch_batches)
  return dataset.with_options(record_files.pipeline_options(deterministic=not is_training or
                                               seed is not None))


def _parse_checked(serialized, num_channels, file_name, index):
  """-> (image, or a blank one if it does not decode; label; 'record N of <file>'; '' or
  why it could not be used)."""
  encoded, label = image_records.parse_encoded_example(serialized)
  image, decoded = checked_decode.decode_or_blank(
      encoded, lambda value: image_records.decode_image(value, num_channels),
      tf.zeros([1, 1, num_channels], tf.uint8))
  where = tf.strings.join(['record ', tf.strings.as_string(index), ' of ', file_name])
  damage = tf.where(decoded, '', 'the image does not decode')
  return image, label, where, damage
