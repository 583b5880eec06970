"""Task adaptation (RLAnything's Algorithm 2): critique what the reward model saw
going wrong, propose an easier or harder variant, accept it only if it moves the
task's accuracy toward the band where learning happens."""
