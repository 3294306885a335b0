"""Classifies one video file with a model written by export.py.

    prediction = predict_video(PredictConfig(model_dir='models/ucf101', video='clip.mp4'))
    prediction.top         # [(label name, class index, probability)], best first
    prediction.model_dir   # 'models/ucf101/2': the highest version, as TF Serving serves

--model_dir is a base directory of numbered versions or one version directory
(serving.export_layout); model_info.json and labels.txt come from its assets.extra/.

The file goes through the path its model's evaluation data went through, so the model sees
what eval.py would show it for that video: the converter's per-video work
(`datasets.conversion.video_frames.process_video`: PyAV decode, short side resized,
optional frame rate, TV-L1 flow for flow models, JPEG at the converter's quality), one
shard of chunked clip records with its index (`datasets.formats.video_records`), then
evaluation's clip sampling and centre crop (the video input's evaluation mode,
`datasets.inputs.input_factory`, values in [-1, 1]; a frame that does not decode is a
DataError naming it). The model's logits are averaged over the video's clips (as evaluation does) and
turned into probabilities.
"""

import dataclasses
import os
import tempfile
from typing import Optional

import numpy as np

from datasets.conversion import video_shards
from datasets.inputs import input_factory
from datasets.inputs.input_factory import VIDEO
from datasets.inputs.input_settings import InputSettings
from datasets.conversion.video_frames import BadVideo, VideoTask, process_video
from datasets.formats import converted_data, shards, video_records
from datasets.formats.dataset_split import DatasetSplit
from serving import export_layout
from serving.model_info import read_model_info
from tf_compat import tf
from core.errors import DataError
from core.params import ConfigError, param
from deployment.session.gpu_options import (check_gpu_options, gpu_allow_growth_param,
                                    gpu_memory_fraction_param)
from deployment.session.session_config import session_config_for

__all__ = ['PredictConfig', 'Prediction', 'predict_video', 'prepare_clips']


@dataclasses.dataclass(frozen=True)
class PredictConfig:
  """predict.py's parameters."""
  model_dir: Optional[str] = param(
      None, 'export.py\'s --export_dir (its highest version is used, as TF Serving serves '
      'it) or one version directory in it (<export_dir>/<version>).')
  video: Optional[str] = param(None, 'The video file to classify.')
  top_k: int = param(5, 'How many classes to print.')
  json: bool = param(False, 'Print one JSON object instead of a table.')
  # GPU memory.
  gpu_allow_growth: bool = gpu_allow_growth_param()
  gpu_memory_fraction: float = gpu_memory_fraction_param()


@dataclasses.dataclass(frozen=True, eq=False)
class Prediction:
  """probabilities: float32 [num_classes]; top: [(name, index, probability)], best first;
  num_clips: clips the video was scored with; num_frames: its decoded frames; model_dir:
  the version directory that scored it."""
  video: str
  probabilities: np.ndarray
  top: list
  num_clips: int
  num_frames: int
  model_dir: str

  def as_dict(self):
    return {'video': self.video, 'model': self.model_dir, 'num_frames': self.num_frames,
            'num_clips': self.num_clips,
            'predictions': [{'label': name, 'index': index, 'probability': probability}
                            for name, index, probability in self.top]}


def _record_file(directory, video, info):
  """Converts the video into one shard of clip records; -> number of frames."""
  if not os.path.isfile(video):
    raise ConfigError('--video=%s: no such file' % video)
  decoding = info['decoding']
  task = VideoTask(os.path.abspath(video), os.path.basename(video), info['modality'],
                   short_side=decoding['short_side'], fps=decoding['fps'],
                   jpeg_quality=decoding['jpeg_quality'])
  try:
    frames = process_video(task)
  except BadVideo as error:
    raise DataError('--video=%s: %s' % (video, error)) from None
  header = video_records.VideoHeader(
      modality=info['modality'], label=0, label_string='', video_id=task.video_id,
      data_path=video, height=frames['height'], width=frames['width'],
      frame_rate=frames['frame_rate'])
  chunked = video_shards.chunk_video(frames['frames'], header,
                                     video_records.DEFAULT_CHUNK_FRAMES)
  video_shards.write_video_shard([chunked], directory, 'video', 0, 1)
  return len(frames['frames'])


def prepare_clips(video, info, session_config=None):
  """The video as evaluation would sample it: float32 [K, T, crop, crop, C] in [-1, 1].

  `info` is read_model_info's (its "sampling" a Sampling).

  `session_config` (a tf.ConfigProto, e.g. deployment.session.session_config.session_config_for)
  is the input pipeline session's.

  Raises:
    DataError: the file is not a readable video, or a frame the clips need does not
      decode.
  """
  sampling = info['sampling']
  with tempfile.TemporaryDirectory() as directory:
    num_frames = _record_file(directory, video, info)
    split = DatasetSplit(
        name='video', split_name='video', dataset_dir=directory,
        file_pattern=shards.shard_file_pattern(directory, 'video', 1), num_samples=1,
        num_classes=info['num_classes'], labels_to_names={}, num_channels=info['channels'],
        modality=info['modality'])
    with tf.Graph().as_default():
      settings = InputSettings.for_sampling(
          sampling, batch_size=1, modality=info['modality'], num_readers=1,
          num_parallel_calls=1, num_epochs=1, drop_remainder=False)
      dataset = input_factory.get_input(VIDEO).eval_dataset(split, settings)
      clips, _, _, damage = tf.data.make_one_shot_iterator(dataset).get_next()
      with tf.Session(config=session_config) as sess:
        clips, damage = sess.run([clips, damage])
  if damage[0]:
    raise DataError('--video=%s: %s' % (video, damage[0].decode('utf-8')))
  clips = clips[0]
  return (clips[None] if sampling.eval_frames else clips), num_frames


def _logits(model_dir, info, clips, session_config):
  """Runs the SavedModel's signature on clips [K, T, H, W, C]; -> logits [K, C]."""
  with tf.Graph().as_default(), tf.Session(config=session_config) as sess:
    meta = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], model_dir)
    signature = meta.signature_def[info['signature']]
    return sess.run(signature.outputs['logits'].name,
                    {signature.inputs['clips'].name: clips})


def predict_video(config):
  """Checks config, prepares the video, runs the model; -> Prediction. Raises ConfigError
  (a usage mistake) or DataError (a file that is not a readable video)."""
  for flag in ('model_dir', 'video'):
    if not getattr(config, flag):
      raise ConfigError('--%s is required' % flag)
  if config.top_k < 1:
    raise ConfigError('--top_k=%d must be >= 1' % config.top_k)
  check_gpu_options(config)
  session_config = session_config_for(config)
  version_dir = export_layout.find_version_dir(config.model_dir)
  try:
    info = read_model_info(version_dir)
    labels = converted_data.read_labels_file(
        os.path.join(version_dir, export_layout.ASSETS_EXTRA),
        remedy='export the model again with export.py')
  except ValueError as error:
    raise ConfigError('--model_dir=%s: %s' % (config.model_dir, error)) from None
  clips, num_frames = prepare_clips(config.video, info, session_config)
  logits = _logits(version_dir, info, clips, session_config).astype(np.float64).mean(axis=0)
  exp = np.exp(logits - logits.max())
  probabilities = (exp / exp.sum()).astype(np.float32)
  order = np.argsort(-probabilities, kind='stable')[:config.top_k]
  top = [(labels.get(int(i), str(int(i))), int(i), float(probabilities[i])) for i in order]
  return Prediction(config.video, probabilities, top, len(clips), num_frames, version_dir)
