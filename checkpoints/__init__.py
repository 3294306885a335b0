"""Checkpoints, for every entry point: where they are (`paths`), what restoring one into a
graph does, for fine-tuning and for inference (`restore`), and following a training
directory as it writes them (`watch`). Imports only `core` and TensorFlow; name maps for
foreign checkpoints (DeepMind's I3D) come from the caller, which takes them from `nets`.
"""
