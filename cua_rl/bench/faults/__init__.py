"""`cua-rl bench faults`: each fault class injected into its own short, real run,
and what the run made of it."""
