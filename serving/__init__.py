"""Exported models: a SavedModel of a trained video classifier, and predicting with it."""
