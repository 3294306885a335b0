"""What a training run did, recorded from inside `training.train.train`, for the precision
and XLA tests.

    record = spy_on_training(monkeypatch)      # before train()
    train_module.train(config)
    record.losses          # the total loss of every step, in order
    record.run_metadata    # the RunMetadata of the first (traced) step
    record.frozen_objects  # with count_frozen_every=N: [(step, gc.get_freeze_count())]
                           # after step 1 and every Nth (core.heap)

`seed_inputs(monkeypatch)` makes the image and clip inputs deterministic (a fixed shuffle
and crop seed, through `with_settings`), so two runs from one checkpoint differ only in
what the test changes;
`seeded_lenet_checkpoint` is such a checkpoint.
"""

import gc
import dataclasses
import os

from datasets.inputs import clip_input, image_input
from nets import nets_factory
from tf_compat import tf
from training import start_lines, train as train_module

SEED = 7
# The trainer's own, kept before any patch: a second spy replaces the first, never wraps it.
_PROGRESS_STEP = train_module.ProgressStep
_FIRST_STEP = start_lines.first_step


class Record:
  losses = None
  run_metadata = None


def spy_on_training(monkeypatch, count_frozen_every=0):
  """Patches the trainer's step and first-step hook to record into a fresh Record.

  count_frozen_every=N: also record gc.get_freeze_count() after the first step and every
  Nth (`record.frozen_objects`). CPython counts frozen objects by walking them all: about
  300,000 once TensorFlow is imported, millions in a pytest worker holding earlier tests'
  graphs, 30 to 100 ms a count. When every spy counted at every step, the precision
  fixture (300 spied steps) took 60 s in the suite; 33 s without the counts.
  """
  record = Record()
  record.losses = []
  record.frozen_objects = []  # [(step, gc.get_freeze_count())] (core.heap)
  class RecordingStep(_PROGRESS_STEP):
    def __call__(self, *args, **kwargs):
      loss, done = super().__call__(*args, **kwargs)
      if self.local_steps > len(record.losses):
        record.losses.append(float(loss))
        step = self.local_steps
        if count_frozen_every and (step == 1 or step % count_frozen_every == 0):
          record.frozen_objects.append((step, gc.get_freeze_count()))
      return loss, done

  def recording_first_step(setup, run_metadata, summary_writer):
    record.run_metadata = run_metadata
    return _FIRST_STEP(setup, run_metadata, summary_writer)
  monkeypatch.setattr(train_module, 'ProgressStep', RecordingStep)
  monkeypatch.setattr(start_lines, 'first_step', recording_first_step)
  return record


def seed_inputs(monkeypatch):
  """Seeds the training inputs' shuffle and random choices (same order every run)."""
  monkeypatch.setattr(image_input, 'build_image_dataset',
                      with_settings(image_input.build_image_dataset, seed=SEED))
  monkeypatch.setattr(clip_input, 'build_clip_dataset',
                      with_settings(clip_input.build_clip_dataset, seed=SEED))


def seed_graph(monkeypatch, seed=SEED):
  """The trainer's graph gets graph-level seed `seed`: its initializers and dropout draw
  the same numbers every run (with `seed_inputs`, the whole run is repeatable)."""
  build = train_module.build_training_graph
  def seeded(setup):
    tf.set_random_seed(seed)
    return build(setup)
  monkeypatch.setattr(train_module, 'build_training_graph', seeded)


def with_settings(build, **changes):
  """`build` (a pipeline builder) with these fields of its InputSettings replaced."""
  def patched(split, settings, **kwargs):
    return build(split, dataclasses.replace(settings, **changes), **kwargs)
  return patched


def executed_kernels(run_metadata):
  """[(kernel, first output's DataType enum or None)] of every executed node, read from
  the raw step stats ('<node> = <Kernel>(...)' labels)."""
  found = []
  for device in run_metadata.step_stats.dev_stats:
    for node in device.node_stats:
      if ' = ' not in node.timeline_label:
        continue
      kernel = node.timeline_label.split(' = ', 1)[1].split('(')[0]
      dtype = node.output[0].tensor_description.dtype if node.output else None
      found.append((kernel, dtype))
  return found


def seeded_lenet_checkpoint(directory, seed, channels=1):
  """directory/init.ckpt: a 10-class LeNet for `channels`-channel images, initialized
  from graph seed `seed`; -> its path."""
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    nets_factory.get_network_fn('lenet', num_classes=10)(tf.zeros([1, 28, 28, channels]))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return tf.train.Saver().save(sess, os.path.join(directory, 'init.ckpt'),
                                   write_meta_graph=False)
