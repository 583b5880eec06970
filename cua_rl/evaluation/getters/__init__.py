"""Built-in getters; importing this package registers them by name."""

from cua_rl.evaluation.getters import desktop, files

__all__ = ["desktop", "files"]
