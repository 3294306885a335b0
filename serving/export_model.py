"""Exports a trained video classifier as a SavedModel version TF Serving loads.

    result = export_saved_model(ExportConfig(checkpoint_path=..., model_name='i3d',
                                             dataset_dir=..., export_dir='models/ucf101'))
    result.version_dir   # 'models/ucf101/1', then 2, 3, ... (serving.export_layout)

Signature `serving_default` (a graph-mode session saved with the tf.compat.v1
SavedModelBuilder, tag 'serve'):
  input   clips                float32 [batch, frames, height, width, channels] in [-1, 1]
  outputs logits               float32 [batch, num_classes]
          probabilities        float32 [batch, num_classes] (softmax)
          top_k_probabilities  float32 [batch, k]
          top_k_indices        int32 [batch, k]
          top_k_labels         string [batch, k] (labels.txt names)
Batch is always dynamic; height and width are the evaluation crop (I3D's logits layer
squeezes a 1x1 map, so it accepts no other crop). Frames are dynamic when the network
computes the same function without knowing their number; nets that shape a layer from the
static input size (I3D's logits pool shrinks for clips under 9 frames or crops under 193)
get the evaluation's frame count instead. Export decides by running both versions on one
clip of the evaluation size. The exported
weights are the moving averages when the checkpoint has them (as evaluation uses).
In the version's assets.extra/: labels.txt (copied from the records) and model_info.json
(serving.model_info), which predict.py reads. The version appears complete or not at all.
`from_run_record` (export.py's main) first fills the flags not given from the run's record
(resolve.run_record, `EXPORT_LINKS`): the network, width, records, clip frames and crop it
trained; model_info.json's "settings" says where each came from.
"""

import dataclasses
import json
import os
import shutil
from typing import Optional

from absl import logging
import numpy as np

from checkpoints import restore
from checkpoints.paths import resolve_checkpoint
from checkpoints.restore import MOVING_AVERAGE_MODES
from datasets.formats import converted_data
from resolve import names
from resolve.network import NetworkSettings, build_network, network_fn
from resolve.run_record import (Link, changed_fields, check_checkpoint_path,
                                fill_from_record, find_record, no_record)
from resolve.sampling import SamplingFlags, resolve_sampling
from serving import export_layout
from serving.model_info import LABELS_FILENAME, write_model_info
from tf_compat import tf
from core.errors import require
from core.params import ConfigError, param
from deployment.session.gpu_options import (check_gpu_options, gpu_allow_growth_param,
                                    gpu_memory_fraction_param)
from deployment.precision import check_inference_kernels
from deployment.session.precision_options import check_mixed_precision, mixed_precision_param
from deployment.session.session_config import session_config_for

__all__ = ['ExportConfig', 'ExportResult', 'EXPORT_LINKS', 'from_run_record',
           'export_saved_model', 'SIGNATURE']

SIGNATURE = 'serving_default'
_CONVERSION_FILE = 'conversion.json'   # datasets.convert_videos' settings
_DEFAULT_DECODING = {'short_side': 256, 'fps': 0.0, 'jpeg_quality': 90}
_SAME_OUTPUT_TOLERANCE = 1e-5


@dataclasses.dataclass(frozen=True)
class ExportConfig(SamplingFlags):
  """export.py's parameters; the clip sampling flags are eval.py's
  (resolve.sampling.SamplingFlags)."""
  checkpoint_path: Optional[str] = param(
      None, 'Checkpoint prefix, or a directory (latest). A training run\'s flags.cfg beside '
      'it gives the flags not given here (model, width, records, clip frames, crop).')
  model_name: Optional[str] = param(None, 'The network the checkpoint was trained as.')
  dataset_dir: Optional[str] = param(
      None, 'Converted records the model was trained on: labels.txt, modality and the '
      'decoding settings predict.py repeats.')
  export_dir: Optional[str] = param(
      None, 'Base directory of the model\'s versions (TF Serving\'s --model_base_path), '
      'created if missing: the SavedModel goes to <export_dir>/<version>/.')
  export_version: Optional[int] = param(
      None, 'Version to write, a positive integer not yet in --export_dir (default: one '
      'more than the highest there, 1 for a new directory).')
  depth_multiplier: Optional[float] = param(None, 'Width multiplier used in training.')
  use_moving_averages: str = param('auto', 'auto, true or false, as in eval.py.')
  top_k: int = param(5, 'Classes in the top_k outputs.')
  # Precision.
  mixed_precision: str = mixed_precision_param()
  # GPU memory.
  gpu_allow_growth: bool = gpu_allow_growth_param()
  gpu_memory_fraction: float = gpu_memory_fraction_param()


@dataclasses.dataclass(frozen=True)
class ExportResult:
  """version_dir: base_dir/<version>, the SavedModel; info: model_info.json's content."""
  base_dir: str
  version: int
  version_dir: str
  info: dict

  def serving_command(self):
    """The model server command line that serves this base (its highest version)."""
    base = os.path.abspath(self.base_dir)
    return 'tensorflow_model_server --model_base_path=%s --model_name=%s' % (
        base, os.path.basename(base))

  def summary(self):
    """The line export.py prints: what went where, and the command that serves it."""
    return 'exported %s to %s (input %s); serve it with: %s' % (
        self.info['checkpoint'], os.path.abspath(self.version_dir), self.info['input_shape'],
        self.serving_command())



# Training flag -> export flag: what the run trained (as eval.py's EVAL_LINKS).
EXPORT_LINKS = (
    Link('model_name', 'model_name'), Link('depth_multiplier', 'depth_multiplier'),
    Link('dataset_dir', 'dataset_dir', is_dir=True),
    Link('train_image_size', 'eval_image_size'),
    Link('clip_frames', 'clip_frames', unless=('eval_frames',)))


def from_run_record(config, given=None):
  """-> (config with the flags not `given` from --checkpoint_path's run record, Settings).

  given: the fields given explicitly (export.py: given_flags); None = those that differ
  from ExportConfig's defaults."""
  given = changed_fields(config) if given is None else given
  config, settings = fill_from_record(config, given, find_record(config.checkpoint_path),
                                      EXPORT_LINKS)
  if settings.record:
    logging.info('%s', settings.describe())
  return config, settings


def _read_records_info(dataset_dir):
  """-> (dataset_info dict, {label: name}, decoding settings of the converter)."""
  require(dataset_dir, '--dataset_dir is required: the converted records (labels.txt, '
           'modality, decoding settings)')
  try:
    info = converted_data.read_dataset_info(dataset_dir)
    require(info is not None and info.get('modality'), '--dataset_dir=%s holds no '
             'converted video records (no dataset_info.json with a modality)' % dataset_dir)
    labels = converted_data.read_labels_file(dataset_dir)
  except ValueError as error:
    raise ConfigError('--dataset_dir=%s: %s' % (dataset_dir, error)) from None
  path = os.path.join(dataset_dir, _CONVERSION_FILE)
  if not os.path.isfile(path):
    logging.warning('%s is missing: predict.py will decode videos with the converter\'s '
                    'defaults %s', path, _DEFAULT_DECODING)
    return info, labels, dict(_DEFAULT_DECODING)
  with open(path) as handle:
    settings = json.load(handle)
  return info, labels, {key: settings.get(key, value)
                        for key, value in _DEFAULT_DECODING.items()}


def _check(config):
  """-> (checkpoint prefix, version, records info, labels, settings, sampling).

  Raises:
    ConfigError: the first mistake found.
  """
  # The checkpoint first: a mistyped run dir is the first error, not the flags its
  # record would have given.
  require(config.checkpoint_path, '--checkpoint_path is required')
  check_checkpoint_path(config.checkpoint_path)
  checkpoint = resolve_checkpoint(config.checkpoint_path)
  require(config.export_dir, '--export_dir is required')
  require(names.network_spec(config.model_name).default_num_frames is not None,
           '--model_name=%s is an image network; export.py exports video networks'
           % config.model_name)
  require(config.use_moving_averages in MOVING_AVERAGE_MODES, '--use_moving_averages=%s is '
           'not accepted; valid: %s' % (config.use_moving_averages,
                                       ', '.join(MOVING_AVERAGE_MODES)))
  require(config.top_k >= 1, '--top_k=%d must be >= 1' % config.top_k)
  check_mixed_precision(config)
  check_gpu_options(config)
  version = export_layout.choose_version(config.export_dir, config.export_version)
  info, labels, settings = _read_records_info(config.dataset_dir)
  return checkpoint, version, info, labels, settings, resolve_sampling(config)


def _network(config, num_classes):
  """The network's settings from the flags (inference mode), checked against the network."""
  kwargs = {}
  if config.depth_multiplier is not None:
    kwargs['depth_multiplier'] = config.depth_multiplier
  settings = NetworkSettings(config.model_name, num_classes, net_kwargs=kwargs,
                             mixed_precision=config.mixed_precision)
  network_fn(settings)
  return settings


def _build(network_fn, static_shape):
  """Inputs with static and with dynamic frames, sharing one set of variables.

  Returns:
    {'static' | 'dynamic': (clips placeholder, logits)}.
  """
  dynamic_shape = [None, None] + static_shape[2:]
  built = {}
  for name, shape, reuse in (('static', static_shape, None), ('dynamic', dynamic_shape, True)):
    with tf.variable_scope(tf.get_variable_scope(), reuse=reuse):
      clips = tf.placeholder(tf.float32, shape, name='clips_%s' % name)
      built[name] = (clips, network_fn(clips)[0])
  return built


def _same_function(sess, built, static_shape):
  """Whether the dynamic version scores a random clip of the static size like the static.

  It may also fail to run on it (e.g. a pool larger than the map it gets): not the same.
  """
  clip = np.random.RandomState(0).uniform(-1, 1, [1] + static_shape[1:]).astype(np.float32)
  try:
    outputs = [sess.run(built[name][1], {built[name][0]: clip})
               for name in ('static', 'dynamic')]
  except tf.errors.InvalidArgumentError:
    return False
  return outputs[0].shape == outputs[1].shape and np.allclose(
      outputs[0], outputs[1], rtol=0, atol=_SAME_OUTPUT_TOLERANCE)


def _signature(clips, logits, labels, top_k):
  probabilities = tf.nn.softmax(logits)
  top_p, top_i = tf.nn.top_k(probabilities, k=min(top_k, len(labels)))
  names = tf.constant([labels[i] for i in range(len(labels))])
  outputs = {'logits': logits, 'probabilities': probabilities, 'top_k_probabilities': top_p,
             'top_k_indices': top_i, 'top_k_labels': tf.gather(names, top_i)}
  return tf.saved_model.signature_def_utils.predict_signature_def(
      inputs={'clips': clips}, outputs=outputs)


def _save(config, network, directory, checkpoint, labels, static_shape):
  """Restores the checkpoint into the network (NetworkSettings) and saves it to directory
  (empty).

  Returns:
    (restore plan, the exported clips' shape with None for any size).
  """
  with tf.Graph().as_default(), tf.Session(config=session_config_for(config)) as sess:
    built = _build(build_network(network), static_shape)
    plan = restore.restore_inference(
        sess, checkpoint, restore.ModelFit(
            model_name=config.model_name, num_classes=len(labels),
            channels=static_shape[-1], data_flag='dataset_dir=%s' % config.dataset_dir),
        config.use_moving_averages)
    kind = 'dynamic' if _same_function(sess, built, static_shape) else 'static'
    if kind == 'static':
      logging.info('%s shapes a layer from the input size at %s: exporting that size',
                   config.model_name, static_shape)
    clips, logits = built[kind]
    builder = tf.saved_model.builder.SavedModelBuilder(directory)
    builder.add_meta_graph_and_variables(
        sess, [tf.saved_model.tag_constants.SERVING],
        signature_def_map={SIGNATURE: _signature(clips, logits, labels, config.top_k)},
        strip_default_attrs=True)
    builder.save()
  return plan, clips.shape.as_list()


def export_saved_model(config, settings=None):
  """Checks config, restores the checkpoint and writes the next SavedModel version.
  settings: from_run_record's (None: no run record).

  Returns:
    ExportResult.
  Raises:
    ConfigError: a user mistake (missing checkpoint, one of another model, class count or
      modality, a version that exists, ...); nothing is written then.
  """
  settings = settings or no_record(config, changed_fields(config), EXPORT_LINKS)
  checkpoint, version, records, labels, decoding, sampling = _check(config)
  num_classes, channels = len(labels), records['num_channels']
  static_shape = [None, sampling.frames, sampling.crop_size, sampling.crop_size, channels]
  network = _network(config, num_classes)
  check_inference_kernels(network_fn(network), config.mixed_precision,
                          [1] + static_shape[1:], config.model_name)
  with export_layout.staged_version(config.export_dir, version) as directory:
    plan, input_shape = _save(config, network, directory, checkpoint, labels, static_shape)
    info = {
        'model_name': config.model_name, 'net_kwargs': dict(network.net_kwargs),
        'checkpoint': checkpoint,
        'global_step': plan.global_step, 'moving_averages': plan.moving_averages,
        'num_classes': num_classes, 'modality': records['modality'], 'channels': channels,
        'input_shape': input_shape, 'sampling': sampling.to_json(), 'decoding': decoding,
        'signature': SIGNATURE, 'top_k': min(config.top_k, num_classes),
        'mixed_precision': config.mixed_precision, 'settings': settings.as_dict()}
    write_model_info(directory, info)   # creates assets.extra/
    shutil.copy(os.path.join(config.dataset_dir, LABELS_FILENAME),
                os.path.join(directory, export_layout.ASSETS_EXTRA, LABELS_FILENAME))
  version_dir = os.path.join(config.export_dir, str(version))
  logging.info('Exported %s (step %d%s) to %s, input %s', checkpoint, plan.global_step,
               ', moving averages' if plan.moving_averages else '', version_dir, input_shape)
  return ExportResult(config.export_dir, version, version_dir, info)
