"""The tf.data input of image classifiers: shards -> parsed, preprocessed, batched images.

The caller makes the iterator (`tf.data.make_one_shot_iterator` or an initializable one)
and chooses the device, normally the CPU of the worker:

    with tf.device('/job:worker/task:0/cpu:0'):
      settings = InputSettings(batch_size=32, image_size=28, preprocessing_name='lenet')
      dataset = build_image_dataset(split, settings, is_training=True)
      images, labels = tf.data.make_one_shot_iterator(dataset).get_next()
"""

from datasets.formats import checked_decode, image_records
from datasets.inputs import image_preprocessing, record_files
from tf_compat import tf

_SHUFFLE_BUFFER = 1000   # examples, when InputSettings.shuffle_buffer_size is None


def build_image_dataset(split, settings, *, is_training):
  """Builds the dataset of (images, labels) batches of one split.

  Pipeline: shard files (a disjoint subset per shard_index) -> shuffled file order when
  training -> parallel interleave of TFRecord readers -> example shuffle when training ->
  repeat -> parse, decode and preprocess in one parallel map -> batch -> prefetch.

  Args:
    split: a DatasetSplit.
    settings: an InputSettings (each field as `input_settings` says); the image pipeline
      reads batch_size, image_size (output height and width), preprocessing_name (a name
      from image_preprocessing.list_preprocessing()), num_readers, num_parallel_calls,
      shuffle_buffer_size (training; None: 1000), num_epochs (None repeats forever;
      evaluation passes 1), drop_remainder, seed (with a seed, or when not training, the
      order is deterministic), num_shards and shard_index (needs at least num_shards
      files), labels_offset, prefetch_batches, service, with_ids and report_damaged (what
      they add to each element: Returns). Without report_damaged an image that does not
      decode fails the pipeline.
    is_training: training shuffles and uses the random (augmenting) preprocessing.

  Returns:
    tf.data.Dataset of (images float32 [batch, image_size, image_size, C],
    labels int64 [batch][, where][, damage]); batch is static when drop_remainder is True.
    where string [batch], 'record N of <shard file>' (with_ids or report_damaged);
    damage string [batch], '' or why the image could not be used: it does not decode,
    its image is then a blank one (report_damaged).
  """
  shuffle_buffer_size = _checked_shuffle_buffer(split, settings)
  dataset = _examples(split, settings, is_training, shuffle_buffer_size)
  dataset = dataset.map(record_files.as_written(_parser(split, settings, is_training)),
                        num_parallel_calls=settings.num_parallel_calls)
  return record_files.batched(dataset, settings, is_training)


def _checked_shuffle_buffer(split, settings):
  """The shuffle buffer (settings' or 1000), once every setting the pipeline reads is
  checked; ValueError names the first bad one."""
  shuffle_buffer_size = settings.shuffle_buffer_size or _SHUFFLE_BUFFER
  record_files.check_positive(
      batch_size=settings.batch_size, image_size=settings.image_size,
      num_readers=settings.num_readers, prefetch_batches=settings.prefetch_batches,
      num_parallel_calls=settings.num_parallel_calls,
      shuffle_buffer_size=shuffle_buffer_size, num_shards=settings.num_shards)
  record_files.check_arguments(split, settings.num_epochs, settings.num_shards,
                               settings.shard_index, settings.labels_offset)
  return shuffle_buffer_size


def _examples(split, settings, is_training, shuffle_buffer_size):
  """This shard's serialized examples (with their origin when an element names its
  example), repeated num_epochs times (None: forever)."""
  files = record_files.input_files(split, settings.num_shards, settings.shard_index)
  dataset = record_files.read_records(
      files, settings, is_training, shuffle_buffer_size,
      with_origin=settings.report_damaged or settings.with_ids)
  return dataset.repeat(settings.num_epochs)


def _parser(split, settings, is_training):
  """-> map function (serialized[, shard file, record number]) -> (image, label) and
  the ids or the damage report `settings` asks for."""
  preprocess = image_preprocessing.get_preprocessing(settings.preprocessing_name,
                                                     is_training)
  size, offset, report_damaged = (settings.image_size, settings.labels_offset,
                                  settings.report_damaged)
  with_ids = settings.with_ids and not report_damaged

  def parse_and_preprocess(serialized, *origin):
    if not report_damaged:
      image, label = image_records.parse_image_example(serialized, split.num_channels)
      element = preprocess(image, size, size), label - offset
      return element + (_where(*origin),) if with_ids else element
    image, label, where, damage = _parse_checked(serialized, split.num_channels, *origin)
    return preprocess(image, size, size), label - offset, where, damage

  return parse_and_preprocess


def _parse_checked(serialized, num_channels, file_name, index):
  """-> (image, or a blank one if it does not decode; label; 'record N of <file>'; '' or
  why it could not be used)."""
  encoded, label = image_records.parse_encoded_example(serialized)
  image, decoded = checked_decode.decode_or_blank(
      encoded, lambda value: image_records.decode_image(value, num_channels),
      tf.zeros([1, 1, num_channels], tf.uint8))
  damage = tf.where(decoded, '', 'the image does not decode')
  return image, label, _where(file_name, index), damage


def _where(file_name, index):
  """'record N of <shard file>': an image's id."""
  return tf.strings.join(['record ', tf.strings.as_string(index), ' of ', file_name])
