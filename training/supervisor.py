"""The Supervisor of the training loop (training.session_loop): slim.learning.train's, with
a session manager that keeps the parameter servers' model, restores the input's position
after the variables (training.input_position), and no graph.pbtxt."""

from absl import logging

from tf_compat import tf
from training.input_position import input_position

__all__ = ['make_supervisor', 'ResumingSessionManager', 'Supervisor']


class ResumingSessionManager(tf.train.SessionManager):
  """prepare_session that keeps the parameter servers' model when it is initialized.

  A restarted chief would otherwise restore its last checkpoint over newer state (or,
  before its first checkpoint, re-initialize it): the global step would go back.
  """

  def __init__(self, global_ready_op, distributed, **kwargs):
    super().__init__(**kwargs)
    self._global_ready_op = global_ready_op
    self._distributed = distributed
    self.continued_from_servers = False

  def _model_on_servers(self, master, config):
    sess = tf.Session(master, graph=self._graph, config=config)
    try:
      return len(sess.run(self._global_ready_op)) == 0
    finally:
      sess.close()

  def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                      **kwargs):
    if self._distributed and self._model_on_servers(master, kwargs.get('config')):
      logging.info('The parameter servers already hold an initialized model: continuing '
                   'from their state, not from a checkpoint')
      self.continued_from_servers = True
      return self.wait_for_session(master, config=kwargs.get('config'),
                                   max_wait_secs=kwargs.get('max_wait_secs', 7200))
    return super().prepare_session(master, init_op=init_op, saver=saver,
                                   checkpoint_dir=checkpoint_dir, **kwargs)

  def _restore_checkpoint(self, master, saver=None, checkpoint_dir=None, **kwargs):
    """The variables, then the input's position from the same checkpoint (the chief's)."""
    sess, restored = super()._restore_checkpoint(master, saver=saver,
                                                 checkpoint_dir=checkpoint_dir, **kwargs)
    position = input_position(self._graph)
    if restored and position is not None and checkpoint_dir:
      position.restore(sess, tf.train.latest_checkpoint(checkpoint_dir))
    return sess, restored


class Supervisor(tf.train.Supervisor):
  """tf.train.Supervisor whose chief writes the graph to TensorBoard's events only.

  The stock chief also writes `graph.pbtxt`, the graph as protobuf text, with Python's
  text formatter: 5.3 of the 64 s of a reduced I3D run's start under cProfile (2 clones),
  for a file TensorBoard does not read (it reads the graph in the events file, below).
  """

  def _write_graph(self):
    if self._summary_writer and not self._graph_added_to_summary:
      self._summary_writer.add_graph(self._graph)
      self._summary_writer.add_meta_graph(self._meta_graph_def)
      self._graph_added_to_summary = True


def make_supervisor(ops, logdir, is_chief, global_step, init_fn, distributed, timeouts):
  """-> (the Supervisor: session preparation, queue runners, the chief's summary writer,
  and no thread beside the steps (no summary op, no intervals); its session manager; the
  saver of the chief's checkpoints: the variables and the input's position).

  The Supervisor's own saver restores the variables only: a checkpoint without the
  position (older, or of other input settings) still resumes."""
  graph = global_step.graph
  with graph.as_default():
    saver = tf.train.Saver(save_relative_paths=True)  # train_dir can move (paths)
    position = input_position(graph)
    checkpoint_saver = saver if position is None else tf.train.Saver(
        var_list=tf.global_variables() + tf.get_collection(tf.GraphKeys.SAVEABLE_OBJECTS)
        + [position.saveable], save_relative_paths=True)
  manager = ResumingSessionManager(
      ops.global_ready_op, distributed, local_init_op=ops.local_init_op,
      ready_op=ops.ready_op, ready_for_local_init_op=ops.ready_for_local_init_op,
      graph=graph, recovery_wait_secs=timeouts.recovery_wait_secs)
  return Supervisor(
      graph=graph, is_chief=is_chief, logdir=logdir, init_op=ops.init_op,
      local_init_op=ops.local_init_op, ready_op=ops.ready_op,
      ready_for_local_init_op=ops.ready_for_local_init_op, summary_op=None,
      global_step=global_step, saver=saver, save_summaries_secs=0, save_model_secs=0,
      recovery_wait_secs=timeouts.recovery_wait_secs,
      stop_grace_secs=max(1.0, timeouts.stop_grace_secs), session_manager=manager,
      init_fn=init_fn), manager, checkpoint_saver
