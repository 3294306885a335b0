r"""Runs a tf.data service server: the dispatcher, or a data worker.

    python -m datasets.data_service --role=dispatcher --port=5050 \
        --work_dir=/tmp/run/data_service
    python -m datasets.data_service --role=worker --dispatcher_address=localhost:5050

Trainers given `--data_service_address=host:5050` then read their batches from the data
workers, which run the trainer's input pipeline (reading and decoding) on their own cores
or machines. The dispatcher's --work_dir keeps its journal: restarted on the same port, it
resumes. Each server logs one 'ready' line and serves until SIGTERM or SIGINT.
`deployment.launch_local --num_data_workers=N` starts them beside a local cluster, and
configs/slurm/train.sbatch as an srun step (--addressing=slurm). The work is in
datasets/inputs/data_service.py; docs/data_service.md says more.

Exit status (the table in core/errors.py): 0 stopped by a signal; 2 bad flags (one
`error:` line), or a port that cannot be listened on.
"""

import os

import tf_compat  # noqa: F401  (first: TF set-up before anything else)
from absl import app

from core.errors import EXPECTED, USAGE, report
from core.params import (config_from_flags, define_flags, parse_flags,
                         reject_positional_arguments)
from datasets.inputs import data_service
from datasets.inputs.data_service import ServerConfig

define_flags(ServerConfig)


def main(argv):
  if reject_positional_arguments(argv):
    return USAGE
  try:
    config, address = data_service.with_addressing(config_from_flags(ServerConfig),
                                                      os.environ)
    return data_service.serve(config, address=address)
  except EXPECTED as error:
    return report(error)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
