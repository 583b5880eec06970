"""`cua-rl bench soak`: one training run for a long time under a stream of faults,
watched from outside."""
