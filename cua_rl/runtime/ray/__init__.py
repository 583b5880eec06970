"""A run placed on a Ray cluster: learner ranks, model-server replicas and fleet
workers as actors."""
