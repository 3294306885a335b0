"""The independent reference of tests/evaluation/test_image_eval.py: the digits' test records
decoded with Pillow, preprocessed in NumPy as the 'lenet' preprocessing specifies (bilinear
8x8 -> 28x28 with half-pixel centres, then (x - 128) / 128), run through a LeNet built in a
graph of its own whose variables are loaded with values read by tf.train.load_checkpoint;
accuracy and recall@5 in NumPy."""

import glob
import io
import os

import numpy as np
from PIL import Image

from nets import nets_factory
from tf_compat import tf, slim

NUM_TEST = 360


def _bilinear_weights(out_size, in_size):
  """TF2 tf.image.resize bilinear (half-pixel centres): (lower, upper, lerp) per output."""
  scale = in_size / out_size
  centre = (np.arange(out_size) + 0.5) * scale - 0.5
  floor = np.floor(centre)
  lower = np.maximum(floor, 0).astype(np.int64)
  upper = np.minimum(np.ceil(centre), in_size - 1).astype(np.int64)
  return lower, upper, centre - floor


def lenet_preprocess_numpy(image, size=28):
  """uint8 [H, W] -> float32 [size, size, 1]."""
  image = image.astype(np.float64)
  rows_lo, rows_hi, row_lerp = _bilinear_weights(size, image.shape[0])
  cols_lo, cols_hi, col_lerp = _bilinear_weights(size, image.shape[1])
  top = image[rows_lo][:, cols_lo] * (1 - col_lerp) + image[rows_lo][:, cols_hi] * col_lerp
  bottom = (image[rows_hi][:, cols_lo] * (1 - col_lerp)
            + image[rows_hi][:, cols_hi] * col_lerp)
  resized = top * (1 - row_lerp[:, None]) + bottom * row_lerp[:, None]
  return ((resized - 128.0) / 128.0).astype(np.float32)[:, :, None]


def read_split(dataset_dir, split='test'):
  """(images float32 [N, 28, 28, 1], labels int64 [N], raw uint8 [N, 8, 8]) in
  sorted-file, record order."""
  images, labels, raw = [], [], []
  for path in sorted(glob.glob(os.path.join(dataset_dir, '%s-*' % split))):
    for record in tf.io.tf_record_iterator(path):
      example = tf.train.Example.FromString(record)
      feature = example.features.feature
      encoded = feature['image/encoded'].bytes_list.value[0]
      with Image.open(io.BytesIO(encoded)) as image:
        pixels = np.asarray(image.convert('L'))
      raw.append(pixels)
      images.append(lenet_preprocess_numpy(pixels))
      labels.append(feature['image/class/label'].int64_list.value[0])
  return np.stack(images), np.array(labels, np.int64), np.stack(raw)


def reference_logits(values, images, num_classes=10, use_batch_norm=False):
  """LeNet (is_training=False) in a graph of its own, loaded with `values` by name."""
  with tf.Graph().as_default():
    inputs = tf.placeholder(tf.float32, [None, 28, 28, 1])
    kwargs = {'use_batch_norm': True} if use_batch_norm else {}
    network_fn = nets_factory.get_network_fn('lenet', num_classes, is_training=False,
                                             **kwargs)
    logits, _ = network_fn(inputs)
    variables = slim.get_model_variables()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for var in variables:
        var.load(values[var.op.name], sess)
      return sess.run(logits, {inputs: images})


def accuracy_and_recall5(logits, labels):
  accuracy = float(np.mean(np.argmax(logits, axis=1) == labels))
  top5 = np.argsort(-logits, axis=1)[:, :5]
  recall = float(np.mean([label in row for label, row in zip(labels, top5)]))
  return accuracy, recall


def checkpoint_values(path):
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def ema_values(values):
  return {name: values[name + '/ExponentialMovingAverage'] for name in values
          if name + '/ExponentialMovingAverage' in values}
