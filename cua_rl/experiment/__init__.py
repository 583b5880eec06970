"""`cua-rl experiment FILE`: arms x seeds of training runs, evaluated at fixed policy
versions, reported in the layout of the paper's Table 1 (docs/experiments.md).

- `spec.py`: the experiment file (arms, seeds, evaluated versions and sets);
- `cells.py`: the grid's cells and steps, and each cell's saved state (cell.json);
- `runner.py`: the loop over cells (resumable, stopped cleanly by SIGTERM);
- `commands.py`, `child.py`: each step as a `cua-rl` command in a child process;
- `results.py`: the figures read from what a step left;
- `table.py`, `curves.py`: table.json / table.md and curves.png;
- `grid.py`: the whole command, from the file to the outputs.

Experiment files shipped with cua-rl are in the repository's `experiments/` folder.
"""
