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
"""

import hashlib
import json
import time

from absl import logging

from core.errors import ConfigError
from tf_compat import tf
from training import optimization

# What every worker must share with the chief, beyond the schedule's flags: what is
# trained (network, data), how a step is made, and in what precision.
_MODEL_FLAGS = ('model_name', 'dataset_name', 'dataset_split_name', 'labels_offset',
                'train_image_size', 'clip_frames', 'optimizer', 'weight_decay',
                'label_smoothing', 'moving_average_decay', 'clip_gradient_norm',
                'mixed_precision', 'loss_scale', 'xla', 'worker_replicas', 'num_ps_tasks',
                'trainable_scopes')
AGREED_FLAGS = _MODEL_FLAGS + tuple(
    flag for flag in optimization.SCHEDULE_FLAGS if flag not in _MODEL_FLAGS)


def agreed_settings(setup):
  """{name: value} every worker must share: the flags above as resolved, the network's
  extra arguments (e.g. depth_multiplier) and the dataset's size as this task read it."""
  config = setup.config
  settings = {flag: getattr(config, flag) for flag in AGREED_FLAGS}
  settings.update(setup.network_kwargs)
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
    chiefs = json.loads(sess.run(self._variable).decode())
    difference = first_difference(self.settings, chiefs)
    if difference is None:
      logging.info('Settings agree with the chief\'s: digest %s', digest(self.settings))
      return
    name, own, theirs = difference
    raise ConfigError(
        'worker %d does not train what the chief trains: %s here, %s on the chief '
        '(worker 0); start every task with the same flags (digest %s here, %s on the '
        'chief)' % (self._task, _named(name, own), _named(name, theirs),
                    digest(self.settings), digest(chiefs)))
