r"""Starts a whole parameter-server cluster on this host, one process per task.

    python -m deployment.launch_local --num_ps=1 --num_workers=2 \
        --task_log_dir=/tmp/lenet_cluster/logs -- \
        python train_image_classifier.py --dataset_name=digits --dataset_dir=DIR \
        --model_name=lenet --train_dir=/tmp/lenet_cluster --sync_replicas \
        --replicas_to_aggregate=2 --max_number_of_steps=200

With `--num_ps=0` every task is a worker and the workers all-reduce their gradients
(docs/cluster.md, "Workers without parameter servers"); the trainer's command then says
`--variable_update=replicated`. With `--num_data_workers=N` a tf.data service comes first: a dispatcher (journal in
<task_log_dir>/data_service) and N data workers, each `python -m datasets.data_service`,
and every task also gets `--data_service_address` (docs/data_service.md). A data worker
that ends is one line and the job goes on; a dispatcher that ends is restarted.

Every task runs the command after `--` plus its place in the cluster (`--ps_hosts
--worker_hosts --job_name --task_index`, or TF_CONFIG with `--addressing=tf_config`), on
127.0.0.1 ports picked free, in this working directory and environment. Each task writes
one log, `<task_log_dir>/<job>-<index>.log` (default task_log_dir: runs/launch_local); the
start-up line says where, and what each task runs. The tasks run in a private network
namespace when this host allows one (`--isolation`). The work is in
deployment/cluster/launch_local.py.

The launcher forwards Ctrl-C and SIGTERM (workers first, then parameter servers), stops
every process it started when any task fails or when it ends. A second Ctrl-C kills at
once (status 128 + the signal number).

Exit status: the chief's, or the first failed task's (a failure is never reported as
success; the trainer's statuses are the table in core/errors.py); 2 (USAGE) bad flags,
no command after `--`, a command that sets the cluster flags itself, or
--isolation=namespace where no private namespace can be made.
"""

from absl import app

from core.errors import EXPECTED, report
from core.params import config_from_flags, define_flags, parse_flags
from deployment.cluster import launch_local
from deployment.cluster.launch_local import LaunchConfig

define_flags(LaunchConfig)


def main(argv):
  try:
    config = config_from_flags(LaunchConfig)
    # Not positional leftovers: argv[1:] is the command after `--`, which every task runs.
    return launch_local.launch(config, argv[1:])
  except EXPECTED as error:
    return report(error)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
