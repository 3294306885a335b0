"""The `tf.ConfigProto` every session of a deployment is created with.

The GPU options matter: TensorFlow's default maps all memory of every visible GPU into
the process even when one clone uses one GPU, which users read as "TF grabs all GPU
memory". `gpu_allow_growth` (on by default here) and `gpu_memory_fraction` change that,
and they only work if this config reaches the session that runs the graph: pass it to
`slim.learning.train(session_config=...)` or `tf.Session(config=...)`. An entry whose
config declares the two fields (`deployment.session.gpu_options`) gets its config from
`session_config_for(config)`.
"""

from tf_compat import tf

__all__ = ['make_session_config', 'session_config_for', 'num_cpu_devices', 'uses_nccl']


def num_cpu_devices(deploy_config):
  """Logical CPU devices a process needs: one per clone with clone_on_cpu, else 1."""
  if deploy_config is not None and deploy_config.clone_on_cpu:
    return deploy_config.num_clones
  return 1


def make_session_config(deploy_config=None, gpu_allow_growth=True, gpu_memory_fraction=0.0,
                        allow_soft_placement=True, log_device_placement=False,
                        intra_op_threads=0, inter_op_threads=0, device_filters=None):
  """Builds the session config for `deploy_config`.

  Args:
    deploy_config: a `DeploymentConfig` or None (one CPU device).
    gpu_allow_growth: allocate GPU memory as needed instead of all of it at start.
    gpu_memory_fraction: if > 0, cap each GPU at this fraction of its memory.
    allow_soft_placement: let ops without a GPU kernel fall back to the CPU.
    log_device_placement: log where every op runs (debugging placement).
    intra_op_threads, inter_op_threads: thread pool sizes, 0 = TensorFlow's choice.
    device_filters: in a cluster, the devices this task may talk to.

  Returns:
    A `tf.ConfigProto`. With `clone_on_cpu` it declares one logical CPU device per
    clone, so clone i's ops really run on `/device:CPU:i`. Replicated clones on GPUs
    get `experimental.collective_nccl` (their all-reduce runs NCCL's kernels).
  """
  if not 0.0 <= gpu_memory_fraction <= 1.0:
    raise ValueError('gpu_memory_fraction=%r must be in [0, 1] (0 = no cap)'
                     % (gpu_memory_fraction,))
  gpu_options = tf.GPUOptions(allow_growth=bool(gpu_allow_growth),
                              per_process_gpu_memory_fraction=float(gpu_memory_fraction))
  config = tf.ConfigProto(
      device_count={'CPU': num_cpu_devices(deploy_config)},
      gpu_options=gpu_options,
      allow_soft_placement=allow_soft_placement,
      log_device_placement=log_device_placement,
      intra_op_parallelism_threads=intra_op_threads,
      inter_op_parallelism_threads=inter_op_threads,
      device_filters=list(device_filters or []))
  if uses_nccl(deploy_config):
    config.experimental.collective_nccl = True
  return config


def uses_nccl(deploy_config):
  """Whether the deployment all-reduces between GPUs (replicated, clones on GPUs)."""
  return (deploy_config is not None and getattr(deploy_config, 'replicated', False)
          and not deploy_config.clone_on_cpu)


def session_config_for(config, deploy_config=None):
  """make_session_config with `config`'s gpu_allow_growth and gpu_memory_fraction.

  Args:
    config: a config declaring the fields of `deployment.session.gpu_options` (already checked).
    deploy_config: as for make_session_config; None for a single-device session
      (evaluation, export, prediction).
  """
  return make_session_config(deploy_config, gpu_allow_growth=config.gpu_allow_growth,
                             gpu_memory_fraction=config.gpu_memory_fraction)
