"""resolve.network: one builder of the network from its settings, for every entry."""

import dataclasses

import numpy as np
import pytest

from core.params import ConfigError
from resolve.network import NetworkSettings, build_network, network_fn
from tf_compat import tf


def _logits(settings, inputs):
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    logits, end_points = build_network(settings)(tf.constant(inputs))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run(logits), end_points, logits.dtype


def test_builds_the_registry_network_with_its_settings():
  settings = NetworkSettings('lenet', num_classes=7, is_training=True, weight_decay=0.5,
                             net_kwargs={'dropout_keep_prob': 0.9})
  built = network_fn(settings)
  assert built.weight_decay == 0.5 and built.spec.name == 'lenet'
  logits, _, dtype = _logits(settings, np.zeros([2, 28, 28, 1], np.float32))
  assert logits.shape == (2, 7) and dtype == tf.float32


def test_mixed_precision_computes_in_half_with_float32_logits():
  settings = NetworkSettings('lenet', num_classes=3, mixed_precision='bfloat16')
  with tf.Graph().as_default():
    logits, _ = build_network(settings)(tf.zeros([1, 28, 28, 1]))
    assert logits.dtype == tf.float32
    assert all(v.dtype.base_dtype == tf.float32 for v in tf.global_variables())
    convolutions = [op for op in tf.get_default_graph().get_operations()
                    if op.type == 'Conv2D']
    assert convolutions and all(op.get_attr('T') == tf.bfloat16 for op in convolutions)
  assert network_fn(settings).spec.name == 'lenet'   # float32: the kernel checks wrap it


def test_float32_network_is_the_registry_function():
  settings = NetworkSettings('lenet', num_classes=3)
  assert hasattr(build_network(settings), '__wrapped__')   # functools.wraps of the net
  half = build_network(dataclasses.replace(settings, mixed_precision='float16'))
  assert not hasattr(half, '__wrapped__') and half.spec.name == 'lenet'


@pytest.mark.parametrize('settings, blame, start', [
    (NetworkSettings('lenet', 3, net_kwargs={'depth_multiplier': 2.0}), None,
     '--model_name=lenet: '),
    (NetworkSettings('lenet', 3, net_kwargs={'depth_multiplier': 2.0}),
     '--depth_multiplier', '--depth_multiplier: '),
    (NetworkSettings('lenet', 3, weight_decay=-1.0), None, '--model_name=lenet: '),
])
def test_a_refused_setting_is_one_line_naming_the_flag(settings, blame, start):
  with pytest.raises(ConfigError) as raised:
    build_network(settings, blame)
  assert str(raised.value).startswith(start) and '\n' not in str(raised.value)
