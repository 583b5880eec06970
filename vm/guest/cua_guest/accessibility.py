"""Finding an interpreter with pyatspi and running the tree dump in it.

pyatspi is a system package (python3-pyatspi), rarely importable from the
guest's own virtualenv, so the dump always runs as a subprocess: the guest's
interpreter if it has pyatspi, else /usr/bin/python3 if that has it. Without
either, the routes answer 501 with what to install.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from cua_guest.procs import run_command

SYSTEM_PYTHON = "/usr/bin/python3"
DUMP_TIMEOUT_S = 120.0
_SCRIPT = Path(__file__).with_name("atspi_dump.py")


def _system_python_exists() -> bool:
    return Path(SYSTEM_PYTHON).exists()


class AccessibilityUnavailable(Exception):
    """No interpreter with pyatspi, or the dump failed (message says which)."""


class AtspiRunner:
    """Runs atspi_dump.py with the first interpreter that can import pyatspi."""

    def __init__(self) -> None:
        self._python: str | None = None
        self._lock = asyncio.Lock()

    async def _interpreter(self) -> str:
        async with self._lock:
            if self._python is None:
                if importlib.util.find_spec("pyatspi") is not None:
                    self._python = sys.executable
                elif _system_python_exists():
                    probe = await run_command([SYSTEM_PYTHON, "-c", "import pyatspi"], timeout=30)
                    if probe.returncode == 0:
                        self._python = SYSTEM_PYTHON
            if self._python is None:
                raise AccessibilityUnavailable(
                    "pyatspi is not importable by this interpreter or /usr/bin/python3; "
                    "install python3-pyatspi and at-spi2-core"
                )
            return self._python

    async def run(self, mode: str) -> dict[str, Any]:
        """Run the dump in `mode` ("tree" or "terminal") and return its JSON."""
        python = await self._interpreter()
        result = await run_command([python, str(_SCRIPT), mode], timeout=DUMP_TIMEOUT_S)
        if result.timed_out:
            raise AccessibilityUnavailable(f"the accessibility dump took over {DUMP_TIMEOUT_S} s")
        if result.returncode != 0:
            tail = result.stderr.strip().splitlines()[-1:] or ["no error output"]
            raise AccessibilityUnavailable(f"the accessibility dump failed: {tail[0]}")
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise AccessibilityUnavailable(
                f"the accessibility dump printed bad JSON: {exc}"
            ) from None
