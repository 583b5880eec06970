"""Built-in metrics; importing this package registers them by name."""

from cua_rl.evaluation.metrics import docs, files, images, slides, table, text

__all__ = ["docs", "files", "images", "slides", "table", "text"]
