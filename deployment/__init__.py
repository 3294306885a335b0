"""Device questions: clones, replicas, parameter servers, gradients, sessions."""
