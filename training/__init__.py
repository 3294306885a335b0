"""Training: configuration, optimizers, restore, and the training job itself."""
