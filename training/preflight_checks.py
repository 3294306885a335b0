"""The checks `python -m training.check_cluster` runs before launch, from the trainer's config.

    results = check_before_launch(config, os.environ, planned)   # [(ok, line)]

The cluster is placed as the trainer places it (`lifecycle.resolve_job`: the flags,
TF_CONFIG or --addressing). A job whose addresses exist only once it runs is placed from
`planned` (deployment.cluster.preflight.PlannedJob): a launch_local job with the flags the
launcher appends, after the launcher's own checks of its settings; a Slurm job, from the
host that submits it, with the variables its chief's srun task will see. Then, with no
task running: every host resolves, no port is taken (bound on this machine, answering on
another host; a planned job's ports are picked at its start), the trainer's own checks
pass for the chief (`training.setup.check_train_config`, what every worker runs before
its graph; only the GPUs --num_clones needs are left to the nodes) and train_dir takes a
file. Without --job_name the cluster is seen as its chief sees it. Each result is one line.
"""

import dataclasses

from core import errors
from deployment.cluster import launch_local, local_layout, preflight, slurm_env
from tf_compat import tf
from training import lifecycle
from training import setup as train_setup

__all__ = ['check_before_launch', 'place']

GIVEN, LAUNCH_LOCAL, SLURM = 'given', 'launch_local', 'slurm'


def _kind(config, environ, planned):
  """GIVEN (flags, TF_CONFIG, a scheduler's environment), LAUNCH_LOCAL or SLURM."""
  if planned.launch_local_workers:
    errors.require(not planned.slurm_ntasks, '--launch_local_workers=%d and --slurm_ntasks=%d'
                   ': check one job at a time' % (planned.launch_local_workers,
                                                  planned.slurm_ntasks))
    return LAUNCH_LOCAL
  if planned.slurm_ntasks:
    errors.require(config.addressing == 'slurm', '--slurm_ntasks=%d describes a Slurm job: '
                   'add --addressing=slurm (configs/slurm/train.sbatch gives it to every '
                   'task)' % planned.slurm_ntasks)
    return SLURM
  errors.require(config.addressing != 'slurm' or slurm_env.in_step(environ),
                 '--addressing=slurm: this host is in no srun step (no SLURM_STEP_ID, as '
                 'on a submitting host); give the job\'s layout: --slurm_ntasks=P+W (sbatch '
                 '--ntasks) with --slurm_nodes or --slurm_nodelist, P = --num_ps_tasks')
  return GIVEN


def _flag_text(value):
  return ','.join(value) if isinstance(value, tuple) else value


def _launch_local(config, planned):
  """`config` with the flags deployment.launch_local appends to its chief's command
  (placeholder ports: the launcher picks free ones), after the launcher's own checks."""
  owned = local_layout.ADDRESSING_FLAGS + (local_layout.SERVICE_FLAG,)
  command = ['train_image_classifier.py'] + ['--%s=%s' % (name, _flag_text(
      getattr(config, name))) for name in owned if getattr(config, name)]
  try:
    local_layout.check_layout(
        planned.launch_local_ps, planned.launch_local_workers, command,
        launch_local.DEFAULT_LOG_DIR, 'flags', planned.launch_local_data_workers)
  except errors.ConfigError as error:
    raise errors.ConfigError('the launch_local job (--launch_local_*): %s' % error) from None
  hosts = ['127.0.0.1:%d' % (port + 1) for port in range(
      planned.launch_local_ps + planned.launch_local_workers + 1)]
  return dataclasses.replace(
      config, ps_hosts=tuple(hosts[1:planned.launch_local_ps + 1]),
      worker_hosts=tuple(hosts[planned.launch_local_ps + 1:]), job_name='worker',
      task_index=0, data_service_address=(hosts[0] if planned.launch_local_data_workers
                                          else config.data_service_address))


def place(config, environ, planned=None):
  """The Job of the cluster `config` and `environ` (or `planned`) describe, as the trainer
  resolves it; the chief's view when --ps_hosts/--worker_hosts come without --job_name.
  Raises ConfigError, also when they describe no cluster."""
  planned = planned or preflight.PlannedJob()
  kind = _kind(config, environ, planned)
  if kind == LAUNCH_LOCAL:
    config, environ = _launch_local(config, planned), {}
  elif kind == SLURM:
    environ = preflight.slurm_step_environ(planned, config.num_ps_tasks)
    if planned.slurm_data_workers:
      config = dataclasses.replace(config, data_service_address='%s:%d' % (
          environ['SLURM_STEP_NODELIST'].split(',')[0], slurm_env.PORT_BASE))
  elif not config.job_name and (config.ps_hosts or config.worker_hosts):
    config = dataclasses.replace(config, job_name='worker', task_index=0)
  job = lifecycle.resolve_job(config, environ)
  errors.require(job.task is not None, 'no cluster to check: give --ps_hosts and '
                 '--worker_hosts, or TF_CONFIG, or --addressing=slurm|jobset where the '
                 'scheduler sets its environment (from a Slurm submitting host: '
                 '--slurm_ntasks), or --launch_local_workers')
  if kind == SLURM:
    job = dataclasses.replace(job, task=dataclasses.replace(job.task,
                                                            source='--slurm_nodelist'))
  return job


def _trainer_checks(config, task):
  """The trainer's own checks (training.setup.check_train_config) for the chief of `task`'s
  cluster. A submitting host need not have the GPUs of --num_clones: that one rule is
  left to the nodes (the rest run with --clone_on_cpu)."""
  chief = dataclasses.replace(config, worker_replicas=task.num_workers,
                              num_ps_tasks=task.num_ps, task=0)
  gpus = len(tf.config.list_physical_devices('GPU'))
  left = ''
  if chief.num_clones > 1 and not chief.clone_on_cpu and gpus < chief.num_clones:
    chief = dataclasses.replace(chief, clone_on_cpu=True)
    left = ('; the %d GPUs of --num_clones=%d are for each node to have (this machine '
            'sees %d)' % (chief.num_clones, chief.num_clones, gpus))
  train_setup.check_train_config(chief)
  reading = ('is read through the tf.data service' if chief.data_service_address else
             'has a shard file for each of the %d workers' % task.num_workers)
  return ('the trainer\'s checks (training.setup) pass for its chief, worker 0 of %d: the '
          '%s split of %s (%s) %s%s' % (task.num_workers, config.dataset_split_name,
                                        config.dataset_name, config.dataset_dir, reading,
                                        left))


def _results(problems, ok_line):
  return [(False, line) for line in problems] or [(True, ok_line)]


def _address_results(task, kind, planned):
  """Whether the hosts resolve and the ports are free, where the addresses are known."""
  size = ('%d ps + %d workers' % (task.num_ps, task.num_workers) if task.num_ps else
          '%d workers without ps (all-reduce)' % task.num_workers)
  if kind == LAUNCH_LOCAL:
    service = planned.launch_local_data_workers
    return [(True, 'the launch_local job: %s%s on this host, on ports the launcher picks '
             'free at its start' % (size, ' and a tf.data service of %d data workers'
                                    % service if service else ''))]
  results = []
  if kind == SLURM:
    tasks, names, real, per_node = preflight.slurm_layout(planned, task.num_ps)
    results.append((True, 'the Slurm job of --slurm_ntasks=%d: its training step of %d tasks '
                    '(%s) lays out %s per node (%s) on %d nodes; its ports are known at its '
                    'start' % (planned.slurm_ntasks, tasks, size, per_node,
                               planned.slurm_distribution, len(names))))
    if not real:
      return results
  results += _results(preflight.resolution_problems(task),
                      'every host of the %s resolves (%s)' % (size, task.source))
  if kind == GIVEN:
    results += _results(preflight.port_problems(task),
                        'no port of the %s is taken: free on this machine, nothing '
                        'answering on the other hosts' % size)
  return results


def _unique(results):
  """Results without a problem line said twice (--train_dir's, checked by both)."""
  seen, kept = set(), []
  for passed, line in results:
    if passed or line not in seen:
      kept.append((passed, line))
      seen.add(line)
  return kept


def check_before_launch(config, environ, planned=None):
  """[(passed, one line)]: a line per check that passed, a line per problem found.

  planned: a deployment.cluster.preflight.PlannedJob (a launch_local or Slurm job not
  started yet), or None."""
  planned = planned or preflight.PlannedJob()
  try:
    job = place(config, environ, planned)
    results = _address_results(job.task, _kind(config, environ, planned), planned)
  except errors.EXPECTED as error:
    return [(False, str(error))]
  try:
    results.append((True, _trainer_checks(job.config, job.task)))
  except errors.EXPECTED as error:
    results.append((False, str(error)))
  if not config.train_dir:
    results.append((False, '--train_dir is required: where checkpoints and summaries go'))
  else:
    results += _results(preflight.writable_dir_problems(config.train_dir, '--train_dir'),
                        '--train_dir=%s takes files' % config.train_dir)
  return _unique(results)
