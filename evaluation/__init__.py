"""Evaluation of trained checkpoints."""
