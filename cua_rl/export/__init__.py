"""Taking models and trajectories out of a run directory.

`cua-rl export model` turns a learner checkpoint (`RUN_DIR/checkpoints/<role>/step-N`)
into a Hugging Face folder that `transformers` loads and `cua-rl serve` serves;
docs/run-directory.md describes the layout it reads. `cua-rl export trajectories`
writes the run store's scored trajectories as JSON lines of chat messages + image
paths for SFT (docs/run-store.md).
"""
