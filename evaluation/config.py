"""`EvalConfig`: every parameter of eval.py, for image and video datasets alike.

The first block keeps slim's eval_image_classifier names and defaults; the image path
(`evaluation.image_eval`) reads only those. Video datasets (ucf101, hmdb51, video_folder)
take the clip sampling, moving-average, fusion and network-width fields as well. The
watch fields apply to both. `evaluation.setup.check_eval_config` refuses a field that
does not apply to the dataset given, so a flag is never silently ignored. Fields a
training run records are filled from its flags.cfg when not given
(`evaluation.setup.from_run_records`).
"""

import dataclasses
from typing import Optional

from core.params import param
from deployment.session.gpu_options import gpu_allow_growth_param, gpu_memory_fraction_param
from deployment.session.precision_options import mixed_precision_param
from resolve.sampling import SamplingFlags

__all__ = ['EvalConfig', 'MOVING_AVERAGE_MODES', 'DEFAULT_IMAGE_BATCH', 'DEFAULT_VIDEO_BATCH']

from checkpoints.restore import MOVING_AVERAGE_MODES
DEFAULT_IMAGE_BATCH = 100
DEFAULT_VIDEO_BATCH = 1


@dataclasses.dataclass(frozen=True)
class EvalConfig(SamplingFlags):
  """Evaluation parameters; see `evaluation.setup.check_eval_config` for the rules. The
  clip sampling flags are export.py's too (resolve.sampling.SamplingFlags)."""
  master: str = param('', 'The address of the TensorFlow master to use.')
  checkpoint_path: Optional[str] = param(
      None, 'A checkpoint prefix, or a directory (its latest checkpoint is used; with '
      '--watch, the training directory to follow). A training run\'s flags.cfg beside it '
      'gives the flags not given here (model, width, data, clip frames, crop).')
  eval_dir: Optional[str] = param(
      None, 'Directory where the TensorBoard summaries, the confusion matrix PNGs and the '
      'JSON reports are saved.')
  num_preprocessing_threads: int = param(4, 'The number of threads used to create batches.')
  dataset_name: Optional[str] = param(None, 'The name of the dataset to load.')
  dataset_split_name: str = param('test', 'The name of the train/test split.')
  dataset_dir: Optional[str] = param(None, 'Directory of the converted dataset (for '
                                     '--fusion: the rgb records).')
  labels_offset: int = param(0, 'Offset subtracted from the labels.')
  model_name: Optional[str] = param(None, 'The name of the architecture to evaluate.')
  preprocessing_name: Optional[str] = param(
      None, 'Image datasets: preprocessing; unset = the network\'s.')
  moving_average_decay: Optional[float] = param(
      None, 'Set if training kept a moving average of weights: those are evaluated (for '
      'videos the same as --use_moving_averages=true).')
  batch_size: Optional[int] = param(
      None, 'Images (or videos) per batch; unset = %d images or %d video.'
      % (DEFAULT_IMAGE_BATCH, DEFAULT_VIDEO_BATCH))
  max_num_batches: Optional[int] = param(None, 'Max batches to evaluate; unset = all.')
  log_every_n_batches: Optional[int] = param(
      None, 'Log progress over the split (done of total, percent, rate, time left) every '
      'N batches and at the end; unset = about every 5%.')
  use_batch_norm: Optional[bool] = param(
      None, 'For networks where batch norm is optional: as the model was trained.')
  min_accuracy: Optional[float] = param(
      None, 'If set, exit with status 5 when top-1 accuracy is below this value, compared '
      'in counts (342 of 360 reaches 0.95).')
  # Video datasets.
  repeat_first_frame: bool = param(
      False, 'Videos: every frame of a clip is its first frame (the no-motion ablation, as '
      'the model was trained with it).')
  depth_multiplier: Optional[float] = param(
      None, 'Network width multiplier the model was trained with (e.g. 0.125 for a '
      'narrow I3D); unset = the network\'s default.')
  use_moving_averages: str = param(
      'auto', 'Videos: evaluate the moving-average weights: auto (when the checkpoint '
      'holds them), true (required) or false. Image datasets follow '
      '--moving_average_decay.')
  fusion: bool = param(
      False, 'Videos: two-stream evaluation; sums the logits of the rgb model '
      '(--checkpoint_path, --dataset_dir) and the flow model (--flow_checkpoint_path, '
      '--flow_dataset_dir) per video.')
  flow_checkpoint_path: Optional[str] = param(
      None, '--fusion: the flow model\'s checkpoint prefix or directory.')
  flow_dataset_dir: Optional[str] = param(
      None, '--fusion: the converted flow records of the same videos.')
  # Watching a training directory.
  watch: bool = param(
      False, 'Evaluate every new checkpoint in the --checkpoint_path directory as it '
      'appears, each once, until training\'s last step is evaluated or --watch_timeout.')
  watch_timeout: float = param(
      1800.0, '--watch: stop after this many seconds without a new checkpoint.')
  watch_poll_secs: float = param(5.0, '--watch: seconds between looks for a checkpoint.')
  max_number_of_steps: Optional[int] = param(
      None, '--watch: training\'s last step; stop once its checkpoint is evaluated '
      '(unset: stop at the trainer\'s training_done marker or the timeout).')
  # Precision.
  mixed_precision: str = mixed_precision_param()
  # GPU memory.
  gpu_allow_growth: bool = gpu_allow_growth_param()
  gpu_memory_fraction: float = gpu_memory_fraction_param()
