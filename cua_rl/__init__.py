"""cua-rl: asynchronous actor-learner RL for GUI computer-use agents."""

__version__ = "0.1.0"
