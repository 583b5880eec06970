"""Built-in metrics; importing this package registers them by name.

Every module in this folder is imported, so a new family of metrics is one new
file (its heavy format libraries are imported inside the metric bodies).
"""

import importlib
import pkgutil

__all__ = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
for _name in __all__:
    importlib.import_module(f"{__name__}.{_name}")
