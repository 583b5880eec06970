"""`cua-rl bench ...`: what the benches measure (each command's options live in cli/bench/)."""
