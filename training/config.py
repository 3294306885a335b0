"""`TrainConfig`: every training parameter, with TF-Slim's flag names and defaults.

Deliberate differences from slim's train_image_classifier, each a fix for a known trap:
  * weight_decay defaults to None = the network's own default (slim forced 4e-5 into
    every network, overriding e.g. I3D's 1e-7).
  * dataset_name / model_name have no default (slim's 'imagenet' / 'inception_v3' are
    not shipped here); the error lists the valid names.
  * Learning-rate decay steps are computed from the GLOBAL batch (see optimization.py).
  * gpu_allow_growth is on by default.
"""

import dataclasses
from typing import Optional, Tuple

from core.params import param
from deployment.session.gpu_options import gpu_allow_growth_param, gpu_memory_fraction_param
from deployment.session.precision_options import (loss_scale_growth_steps_param, loss_scale_param,
                                          mixed_precision_param, xla_param)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Training configuration; see `training.setup.check_train_config` for the rules."""
  # Deployment.
  master: str = param('', 'The address of the TensorFlow master to use.')
  train_dir: Optional[str] = param(
      None, 'Directory where checkpoints and event logs are written to.')
  num_clones: int = param(1, 'Number of model clones to deploy (per worker).')
  clone_on_cpu: bool = param(False, 'Use CPUs to deploy clones (one logical CPU each).')
  worker_replicas: int = param(1, 'Number of worker replicas.')
  num_ps_tasks: int = param(0, 'The number of parameter servers; 0 = variables local.')
  num_readers: int = param(4, 'Number of record files read in parallel.')
  num_preprocessing_threads: int = param(4, 'Number of threads decoding and preprocessing.')
  log_every_n_steps: int = param(10, 'How often (in steps) progress lines are logged.')
  save_summaries_steps: Optional[int] = param(
      None, 'The graph\'s summaries (losses, clips, histograms) are fetched with the '
      'training step and written every this many global steps; unset = every '
      '--log_every_n_steps; 0 = off.')
  save_summaries_secs: int = param(
      600, 'Summaries are also written once this many seconds have passed since the last '
      '(whichever of this and --save_summaries_steps comes first); 0 = off.')
  save_interval_secs: int = param(
      600, 'The chief saves a checkpoint, between two steps, once this many seconds have '
      'passed since the last; 0 = off. Training always saves at its end.')
  save_interval_steps: int = param(
      0, 'The chief also saves every this many global steps (whichever comes first); '
      '0 = off.')
  task: int = param(0, 'Task id of the replica running the training.')
  variable_update: str = param(
      'parameter_server', 'How clones and workers share the variables: parameter_server '
      '(one copy; the clones\' gradients summed on one device, parameter servers between '
      'machines) or replicated (a copy per clone, the gradients all-reduced: NCCL between '
      'GPUs, a ring over gRPC between workers; workers without parameter servers, '
      '--num_ps_tasks=0, need it). docs/deployment.md.')
  gradient_repacking: int = param(
      2, 'With --variable_update=replicated: the gradients are packed into this many flat '
      'tensors per dtype before the all-reduce (fewer collectives; more overlap with the '
      'backward pass as it grows).')
  gpu_allow_growth: bool = gpu_allow_growth_param()
  gpu_memory_fraction: float = gpu_memory_fraction_param()
  # Optimizer.
  weight_decay: Optional[float] = param(
      None, 'Weight decay on the model weights; unset = the network\'s own default.')
  optimizer: str = param('rmsprop', 'One of adadelta, adagrad, adam, ftrl, momentum, '
                         'sgd, rmsprop.')
  adadelta_rho: float = param(0.95, 'The decay rate for adadelta.')
  adagrad_initial_accumulator_value: float = param(
      0.1, 'Starting value for the AdaGrad accumulators.')
  adam_beta1: float = param(0.9, 'Exponential decay rate for the 1st moment estimates.')
  adam_beta2: float = param(0.999, 'Exponential decay rate for the 2nd moment estimates.')
  opt_epsilon: float = param(1.0, 'Epsilon term for the optimizer.')
  ftrl_learning_rate_power: float = param(-0.5, 'The learning rate power.')
  ftrl_initial_accumulator_value: float = param(0.1, 'Starting value for FTRL accumulators.')
  ftrl_l1: float = param(0.0, 'The FTRL l1 regularization strength.')
  ftrl_l2: float = param(0.0, 'The FTRL l2 regularization strength.')
  momentum: float = param(0.9, 'The momentum for the MomentumOptimizer.')
  rmsprop_momentum: float = param(0.9, 'Momentum for the RMSPropOptimizer.')
  rmsprop_decay: float = param(0.9, 'Decay term for RMSProp.')
  label_smoothing: float = param(0.0, 'The amount of label smoothing.')
  moving_average_decay: Optional[float] = param(
      None, 'Decay for the moving average of weights; unset = no moving average.')
  clip_gradient_norm: float = param(0.0, 'Clip gradients to this global norm (0 = off).')
  # Learning rate.
  learning_rate_decay_type: str = param(
      'exponential', 'One of fixed, exponential, polynomial, piecewise, cosine.')
  learning_rate: float = param(0.01, 'Initial learning rate.')
  end_learning_rate: float = param(
      0.0001, 'Final learning rate of polynomial decay, floor of cosine decay.')
  learning_rate_decay_factor: float = param(0.94, 'Learning rate decay factor.')
  num_epochs_per_decay: float = param(2.0, 'Epochs after which the learning rate decays.')
  learning_rate_boundaries: Tuple[int, ...] = param(
      (), 'piecewise: global steps at which the learning rate changes.')
  learning_rate_values: Tuple[float, ...] = param(
      (), 'piecewise: learning rates, one more than boundaries.')
  warmup_epochs: float = param(0.0, 'Linear warmup from 0 to the schedule, in epochs.')
  # Summaries (docs/monitoring.md).
  summarize_gradients: bool = param(False, 'Histogram and norm summaries per gradient.')
  summarize_activations: bool = param(
      False, 'Activation histograms and sparsity (zero fraction) summaries per end point.')
  # Repeatability (docs/deployment.md, "A run you can repeat and resume").
  random_seed: Optional[int] = param(
      None, 'Seeds the graph (initial weights, dropout) and the input (file order, shuffles, '
      'crops, flips, clip starts); each worker of a cluster draws from a seed derived from '
      'this and its task. Unset: every run differs.')
  deterministic: bool = param(
      False, 'With --random_seed: TensorFlow\'s op determinism (every kernel sums in one '
      'order), so two runs end bitwise equal; an op without a deterministic kernel ends '
      'the run with one line naming it.')
  save_input_position: bool = param(
      True, 'The chief\'s checkpoints hold the training input\'s position, so a resume '
      'continues with the next batch. It holds the batches the pipeline has prefetched: '
      'about 230 MB for 8 clips of 64x224x224 (docs/benchmarks.md); --nosave_input_position '
      'keeps checkpoints small, and a resume then starts a new pass.')
  log_example_ids: bool = param(
      False, 'The chief writes which examples each step trained to example_ids.tsv in '
      '--train_dir (global step, clone, micro-batch, example id: record N of a shard, or '
      'a video id).')
  # Dataset.
  dataset_name: Optional[str] = param(None, 'The name of the dataset to load.')
  dataset_split_name: str = param('train', 'The name of the train/test split.')
  dataset_dir: Optional[str] = param(None, 'Directory of the converted dataset.')
  labels_offset: int = param(0, 'Offset subtracted from the labels (e.g. 1 for a '
                             'background class in the data and none in the model).')
  model_name: Optional[str] = param(None, 'The name of the architecture to train.')
  preprocessing_name: Optional[str] = param(
      None, 'The preprocessing to use; unset = the network\'s own.')
  batch_size: int = param(32, 'The number of samples in each batch, PER CLONE.')
  num_micro_batches: int = param(
      1, 'Gradient accumulation: each clone runs K batches of --batch_size one after '
      'another inside one step and the update applies their mean gradient, so the global '
      'batch is batch_size x num_clones x K (x replicas aggregated) while memory holds one '
      'batch; batch norm still sees one batch at a time. Elsewhere: Horovod '
      'backward_passes_per_step, mmaction2 accumulative_counts, PyTorch Lightning '
      'accumulate_grad_batches, fairseq --update-freq.')
  train_image_size: Optional[int] = param(None, 'Train image size; unset = network\'s.')
  clip_frames: Optional[int] = param(
      None, 'Video nets: frames per training clip; unset = the network\'s (i3d: 64). '
      'train_image_size is the clip\'s crop size.')
  random_flip: bool = param(
      True, 'Video clips: flip half the training clips horizontally; turn off when a mirror '
      'changes the class (left versus right motion).')
  repeat_first_frame: bool = param(
      False, 'Video ablation: every frame of a training clip is its first frame (no motion).')
  max_damaged_fraction: float = param(
      0.01, 'Video clips with a frame that does not decode are skipped (each video named once '
      'in the log); training stops (exit status 3) once such videos are more than this '
      'fraction of the videos this worker reads per epoch. 0 stops at the first.')
  max_number_of_steps: Optional[int] = param(None, 'The maximum number of training steps.')
  max_number_of_epochs: Optional[float] = param(
      None, 'Stop after this many passes over the split instead, converted to steps with '
      'the global batch (so a recipe moved to fewer workers or clones trains the same '
      'epochs); the steps are logged at start. Give it or --max_number_of_steps.')
  use_batch_norm: Optional[bool] = param(
      None, 'For networks where batch norm is optional (lenet); unset = network default.')
  batch_norm_decay: Optional[float] = param(
      None, 'Moving-average decay of batch norm (i3d, lenet with batch norm); unset = '
      'network default (0.999). Lower it for short runs.')
  precise_bn_batches: int = param(
      0, 'Precise batch norm (PySlowFast\'s): after the last step, with the weights fixed, '
      'recompute every batch-norm moving mean and variance over this many training '
      'batches (each clone\'s batch together: the global batch) before the final '
      'checkpoint; not when stopped by a signal. 0 = off (the moving averages).')
  dropout_keep_prob: Optional[float] = param(
      None, 'Dropout keep probability before the logits; unset = network default.')
  depth_multiplier: Optional[float] = param(
      None, 'Channel width multiplier (i3d); unset = network default (1.0).')
  # Input service (docs/data_service.md).
  data_service_address: str = param(
      '', 'host:port of a tf.data service dispatcher (python -m datasets.data_service): its '
      'data workers run the input pipeline (reading, decoding) and this trainer reads their '
      'batches; unset = the pipeline runs in this process.')
  data_service_sharding: str = param(
      'dynamic', 'With --data_service_address: dynamic (every training video or image read '
      'once per epoch across all data workers, and all trainers of the run) or files (each '
      'data worker reads its own shard files; the dispatcher needs --worker_addresses).')
  # Fine-tuning.
  checkpoint_path: Optional[str] = param(
      None, 'Checkpoint (file or directory) to fine-tune from.')
  checkpoint_exclude_scopes: Tuple[str, ...] = param(
      (), 'Scopes of variables NOT restored from checkpoint_path.')
  trainable_scopes: Tuple[str, ...] = param(
      (), 'Scopes of variables to train; unset = all trainable variables.')
  ignore_missing_vars: bool = param(
      False, 'When restoring, skip variables the checkpoint does not hold.')
  freeze_batch_norm: str = param(
      'none', 'Batch norm while training (nets with batch norm: i3d, lenet with '
      '--use_batch_norm): none = batch statistics, moving averages updated; statistics = '
      'normalise with the moving mean/variance (the checkpoint\'s) and keep them, for the '
      'small per-device batches of fine-tuning (dropout still trains); all = also keep '
      'beta/gamma fixed (not trained).')
  # Precision and compilation (deployment/precision.py, loss_scale.py, xla.py).
  mixed_precision: str = mixed_precision_param()
  loss_scale: float = loss_scale_param()
  loss_scale_growth_steps: int = loss_scale_growth_steps_param()
  xla: bool = xla_param()
  # Cluster (docs/cluster.md): addresses, TF_CONFIG or a scheduler's environment, and the
  # lifecycle timeouts.
  ps_hosts: Tuple[str, ...] = param(
      (), 'Parameter servers, host:port,...; with --worker_hosts and --job_name this task '
      'joins a cluster (or set TF_CONFIG instead).')
  worker_hosts: Tuple[str, ...] = param((), 'Workers, host:port,..., the chief (task 0) '
                                        'first.')
  job_name: Optional[str] = param(None, 'This task\'s job in the cluster: ps or worker.')
  task_index: int = param(0, 'This task\'s index within its job.')
  addressing: str = param(
      'auto', 'Where this task finds its cluster: flags (--ps_hosts...), tf_config '
      '(TF_CONFIG), slurm (an srun step of P + W tasks, P = --num_ps_tasks; configs/slurm/), '
      'jobset (a JobSet pod), or auto: the flags or TF_CONFIG if set, else Slurm\'s or '
      'JobSet\'s environment.')
  recovery_wait_secs: float = param(
      1.0, 'Non-chief workers poll this often for the chief\'s model (TensorFlow: 30).')
  startup_timeout_secs: float = param(
      600.0, 'A cluster task gives up (exit 138) when its session is not ready after this '
      'long (a missing chief or ps); 0 = wait forever.')
  step_timeout_secs: float = param(
      600.0, 'A cluster worker, or a trainer reading from a tf.data service, gives up (exit '
      '138) when no training step finishes for this long (a missing worker or ps, no data '
      'worker left); 0 = wait forever.')
  stop_grace_secs: float = param(
      30.0, 'On SIGTERM/SIGINT: how long a blocked step may take to end; parameter servers '
      'wait this long for the workers to leave.')
  sync_replicas: bool = param(False, 'Whether to synchronize the replicas during training.')
  replicas_to_aggregate: int = param(1, 'Gradients to collect before updating params.')
  sync_trace: bool = param(
      False, 'With --sync_replicas: the chief appends a line per update to '
      '<train_dir>/sync_trace.tsv, the gradients each worker gave it and their step.')

  @property
  def is_chief(self):
    return self.task == 0
