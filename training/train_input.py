"""A training job's input: the iterator of per-clone batches, each clone's batch, the
count of what it skips, and the tf.data service's data workers (training.train wires them
into the graph).

Every worker reads its own shard files (InputSettings.shard_index = task), or with
--data_service_address the batches the tf.data service's data workers make; the chief's
local iterator is saved with its checkpoints (training.input_position). Clips whose frames
do not decode are skipped and counted (damaged_frames.SkipCounter); past
--max_damaged_fraction the run ends with one line (`too_many_damaged`).
"""

from absl import logging

from tf_compat import tf
from core.errors import DataError
from datasets.inputs.service_client import DataWorkers
from training import summaries
from training.input_position import INPUT_POSITION, InputPosition

__all__ = ['skip_counter', 'input_iterator', 'clone_inputs', 'data_workers',
           'too_many_damaged']


def skip_counter(setup):
  """The input's SkipCounter (None if it skips nothing): this worker may skip the clips of
  up to --max_damaged_fraction of the videos it reads per epoch (its share of the split)."""
  config = setup.config
  videos = setup.dataset.num_samples / config.worker_replicas
  return setup.input.skip_counter(int(config.max_damaged_fraction * videos))


def input_iterator(setup, skips):
  """One iterator of per-clone batches on the worker's CPU; each clone draws its own,
  timed inside the iterator (summaries.InputWait.timed).

  Workers read disjoint shard files (InputSettings.shard_index = task), or with
  --data_service_address the batches the tf.data service's data workers make. The
  chief's local iterator is saved with its checkpoints (training.input_position).
  """
  with tf.device(setup.deploy_config.inputs_device()):
    dataset = setup.input.dataset(setup.dataset, setup.input_settings, skips=skips)
    iterator = tf.data.make_one_shot_iterator(summaries.InputWait.timed(dataset))
    if (setup.config.is_chief and setup.config.save_input_position
        and setup.input_settings.service is None):
      tf.add_to_collection(INPUT_POSITION, InputPosition(iterator, setup.input_settings,
                                                         setup.dataset))
    return iterator


def clone_inputs(setup, iterator, input_wait, draws):
  """-> (inputs, labels) of one clone: a batch drawn (and timed) on the input device, in
  the step's order (training.draws), finished by its input on the clone's device (video
  clips are scaled and mirrored there), with the input's summaries of what the model
  sees."""
  with tf.device(setup.deploy_config.inputs_device()):
    batch = draws.draw(input_wait, iterator)
  inputs, labels = setup.input.finish(batch, setup.dataset)
  setup.input.summarize(inputs, labels, setup.dataset, setup.input_settings)
  return inputs, labels


def data_workers(setup):
  """The tf.data service's data workers as the dispatcher lists them, or None (local
  input); the start-up line names them."""
  service = setup.input_settings.service
  if service is None:
    return None
  workers = DataWorkers(service.address)
  listed = workers.list()
  logging.info('Input: batches from the tf.data service at %s (%s sharding, job %r); data '
               'workers: %s', service.address, service.sharding, service.job_name,
               'the dispatcher does not answer' if listed is None
               else ', '.join(listed) or 'none yet')
  workers.changes()  # What later lines compare with.
  return workers


def too_many_damaged(setup, skips):
  """The one line that ends a run whose damaged videos passed --max_damaged_fraction."""
  config = setup.config
  damaged = skips.damaged()
  video_id, (shard, frames, total) = sorted(damaged.items())[0]
  return DataError(
      '%d video%s of %s/%s %s frames that do not decode (%d clips skipped), more than '
      '--max_damaged_fraction=%g allows (%d of the %d videos this worker reads); e.g. %s in '
      '%s (frame %d of %d); python -m datasets.verify_records --dataset_dir=%s lists every '
      'damaged shard with the command that rebuilds it' % (
          len(damaged), '' if len(damaged) == 1 else 's', config.dataset_name,
          config.dataset_split_name, 'has' if len(damaged) == 1 else 'have', skips.skipped_clips,
          config.max_damaged_fraction, skips.limit,
          round(setup.dataset.num_samples / config.worker_replicas), video_id, shard,
          frames[0], total, setup.dataset.dataset_dir))
