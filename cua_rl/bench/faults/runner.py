"""`cua-rl bench faults` (cli/bench/faults.py): inject each fault class into a real
short run and report what the run made of it (figures and their meaning:
bench/faults/cases.py).

Runs are quickstart-sized (local desktops, the tiny model, hf engines), one per
fault, one after another (they would disturb each other's figures). Progress
goes to `log`, the figures are returned; every run is bounded by the deadline.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_faults(
    names: list[str],
    deadline_s: float,
    work_dir: Path | None = None,
    *,
    log: Callable[[str], None] = print,
) -> tuple[Path, list[dict[str, Any]]]:
    """One run per fault of `names` (keys of `faults.catalog.FAULTS`) in `work_dir`
    (default: a fresh temporary directory, kept); returns it and the figures of each
    run. Each result is also appended to WORK_DIR/results.jsonl as soon as it is
    known, so a bench cut short keeps what it measured."""
    from cua_rl.bench.faults.cases import FaultBench
    from cua_rl.bench.faults.catalog import FAULTS

    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="cua-rl-faults-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    bench = FaultBench(work_dir, deadline_s, log=log)
    results = []
    for name in names:
        t0 = time.monotonic()
        result = FAULTS[name](bench)
        result["bench_s"] = round(time.monotonic() - t0, 1)
        log(
            f"[{name}] survived={result['survived']} in {result['bench_s']} s"
            + (f": {result['why']}" if "why" in result else "")
        )
        results.append(result)
        with (work_dir / "results.jsonl").open("a") as out:  # kept if the bench is cut short
            out.write(json.dumps(result) + "\n")
    return work_dir, results
