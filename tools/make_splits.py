"""Regenerate the shipped split lists (cua_rl/tasks/data/splits/*.txt) from an OSWorld checkout.

Usage: python tools/make_splits.py PATH_TO_OSWORLD_OR_EVALUATION_EXAMPLES
"""

from __future__ import annotations

import sys
from pathlib import Path

from cua_rl.tasks.splits import write_splits


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for name, path in write_splits(Path(argv[0])).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
