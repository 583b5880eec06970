"""Late imports of the libraries of the optional `eval` extra (format libraries
for metrics; Playwright and tldextract for the Chrome helpers).

The core install must not pull openpyxl, python-docx, pandas & co, and
importing `cua_rl.evaluation` must stay cheap, so metric bodies import their
libraries through `require` at call time; a missing one fails with the install
command instead of a bare ImportError. This module sits outside
`cua_rl.evaluation` so that `cua_rl.chrome`, which the desktop's setup steps
use too, can import it without importing the evaluation package.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cua_rl.errors import EvalExtraMissing

EXTRA_HINT = "pip install 'cua-rl[eval]'"


def require(module: str, package: str, *, metric: str) -> ModuleType:
    """Import `module` or raise EvalExtraMissing naming the package and the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise EvalExtraMissing(
            f"metric {metric!r} needs the Python package {package!r} (module {module!r}), "
            f"which is not installed; install the evaluation extra: {EXTRA_HINT}"
        ) from exc
