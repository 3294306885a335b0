"""Before any step, every worker checks that it trains what the chief trains.

Mismatched tasks are the classic silent failure of parameter-server training: a worker
started with another batch size, schedule or network still sends gradients, and the job
trains something nobody asked for. The chief writes its settings, resolved after
defaults and flagfiles (`agreed_settings`), as JSON to a string variable on the parameter
servers when its session is ready; every other worker reads them before its first step
and refuses in one line naming itself and the first setting that differs (ConfigError:
exit 2, and a worker that refuses leaves for good). The variable is outside the global
collection: never saved in a checkpoint, never part of the model's initialization, so a
resumed job compares the settings of this start, not of the run that wrote the
checkpoint. A restarted chief writes them again.

Without parameter servers there is no shared variable: `BroadcastAgreement` sends the
chief's settings to the others by a collective broadcast, compared the same way.
"""

import hashlib
import json
import time

import numpy as np
from absl import logging
from tensorflow.python.ops import collective_ops

from core.errors import ConfigError
from tf_compat import tf
from training import optimization

# What every worker must share with the chief, beyond the schedule's flags: what is
# trained (network, data), how a step is made, and in what precision.
_MODEL_FLAGS = ('model_name', 'dataset_name', 'dataset_split_name', 'labels_offset',
                'train_image_size', 'clip_frames', 'optimizer', 'weight_decay',
                'label_smoothing', 'moving_average_decay', 'clip_gradient_norm',
                'mixed_precision', 'loss_scale', 'xla', 'worker_replicas', 'num_ps_tasks',
                'trainable_scopes', 'variable_update', 'gradient_repacking')
AGREED_FLAGS = _MODEL_FLAGS + tuple(
    flag for flag in optimization.SCHEDULE_FLAGS if flag not in _MODEL_FLAGS)


def agreed_settings(setup):
  """{name: value} every worker must share: the flags above as resolved, the network's
  extra arguments (e.g. depth_multiplier) and the dataset's size as this task read it."""
  config = setup.config
  settings = {flag: getattr(config, flag) for flag in AGREED_FLAGS}
  settings.update(setup.network.net_kwargs)
  settings['dataset size'] = setup.dataset.num_samples
  return {name: list(value) if isinstance(value, tuple) else value
          for name, value in settings.items()}


def digest(settings):
  """A short fingerprint of `settings`, for the log line of a run that agrees."""
  text = json.dumps(settings, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:12]


def _named(name, value):
  if name == 'dataset size':
    return 'a dataset of %s examples' % value
  if isinstance(value, bool):
    return '--%s%s' % ('' if value else 'no', name)
  if isinstance(value, list):
    value = ','.join(str(item) for item in value)
  return '--%s=%s' % (name, value)


def first_difference(own, chiefs):
  """The first setting (in AGREED_FLAGS order) on which `own` and `chiefs` differ, as
  (name, own value, chief's value), or None."""
  for name in list(own) + [name for name in chiefs if name not in own]:
    if own.get(name) != chiefs.get(name):
      return name, own.get(name), chiefs.get(name)
  return None


class ClusterAgreement:
  """The chief's settings on the parameter servers, and every worker's check of them.

  Build it in the training graph (`device`: the variables device); call `settle(sess)`
  once the session is ready, before the first step.
  """

  def __init__(self, settings, device, task, is_chief):
    self.settings = settings
    self._task, self._is_chief = task, is_chief
    with tf.device(device):
      # collections=[]: not saved, not initialized by the model's init op.
      self._variable = tf.Variable(json.dumps(settings, sort_keys=True), trainable=False,
                                   collections=[], name='cluster_agreement')
    self._written = tf.is_variable_initialized(self._variable)

  def settle(self, sess, poll_secs=0.5):
    """The chief writes its settings; a worker waits for them (the watchdog's start-up
    timeout bounds the wait) and raises ConfigError on the first difference."""
    if self._is_chief:
      sess.run(self._variable.initializer)
      logging.info('Settings every worker must share: digest %s (%d settings)',
                   digest(self.settings), len(self.settings))
      return
    while not sess.run(self._written):
      time.sleep(poll_secs)
    check_against_chief(self.settings, json.loads(sess.run(self._variable).decode()),
                        self._task)


def check_against_chief(own, chiefs, task):
  """Logs the agreement, or raises ConfigError naming the first setting that differs."""
  difference = first_difference(own, chiefs)
  if difference is None:
    logging.info('Settings agree with the chief\'s: digest %s', digest(own))
    return
  name, mine, theirs = difference
  raise ConfigError(
      'worker %d does not train what the chief trains: %s here, %s on the chief '
      '(worker 0); start every task with the same flags (digest %s here, %s on the '
      'chief)' % (task, _named(name, mine), _named(name, theirs), digest(own),
                  digest(chiefs)))


class BroadcastAgreement:
  """Workers without parameter servers: the chief's settings reach the others by a
  collective broadcast between the workers' CPUs, in a session of its own made before
  the training session, so before the model's first collective: a worker whose graph
  differs is refused in one line instead of waiting in a collective that never matches.
  Its group and instance keys are its own (deployment.replicated uses 1 and 2).

  `settle(target, session_config)`: run once per start, under the start-up timeout.
  """

  GROUP_KEY, INSTANCE_KEY = 3, 1
  MAX_BYTES = 1 << 16

  def __init__(self, settings, deploy_config, task, is_chief):
    self.settings = settings
    self._deploy_config, self._task, self._is_chief = deploy_config, task, is_chief

  def _payload(self):
    text = json.dumps(self.settings, sort_keys=True).encode()
    if len(text) >= self.MAX_BYTES:
      raise ConfigError('the settings every worker must share take %d bytes, more than the '
                        '%d the agreement broadcasts' % (len(text), self.MAX_BYTES))
    padded = np.zeros([self.MAX_BYTES + 1], np.int32)
    padded[0] = len(text)
    padded[1:len(text) + 1] = np.frombuffer(text, np.uint8)
    return padded

  def settle(self, target, session_config):
    config = self._deploy_config
    shape, workers = [self.MAX_BYTES + 1], config.num_replicas
    with tf.Graph().as_default(), tf.device(config.optimizer_device()):
      if self._is_chief:
        op = collective_ops.broadcast_send(tf.constant(self._payload()), shape, tf.int32,
                                           workers, self.GROUP_KEY, self.INSTANCE_KEY)
      else:
        op = collective_ops.broadcast_recv(shape, tf.int32, workers, self.GROUP_KEY,
                                           self.INSTANCE_KEY)
      with tf.Session(target, config=session_config) as sess:
        received = sess.run(op)
    if self._is_chief:
      logging.info('Settings every worker must share: digest %s (%d settings), sent to the '
                   'other %d workers', digest(self.settings), len(self.settings), workers - 1)
      return
    text = received[1:received[0] + 1].astype(np.uint8).tobytes().decode()
    check_against_chief(self.settings, json.loads(text), self._task)
