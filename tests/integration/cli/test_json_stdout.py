"""`--json` output is JSON and nothing else on stdout: every cheap command that
prints results, and the smallest run of each bench that fits here, run as real
processes (library output reaches file descriptor 1 only in a real process: e.g.
DeepSpeed's "Setting accelerator to CPU" line on `bench inference`), each stdout
parsed whole. `bench learn`, `bench faults` (minutes of training each) and
`vm sweep` (AWS) are not run here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cua_rl.store.run_store import RunStore

CHEAP = [
    ["config", "show", "--json"],
    ["config", "show", "--for", "eval", "--preset", "quickstart", "--json"],
    ["tasks", "list", "--json"],
    ["tasks", "validate", "--json"],
    ["tasks", "coverage", "--source", "local", "--json"],
    ["templates", "validate", "--json"],
    [
        "bench",
        "fleet",
        "--simulated",
        "--actors",
        "4",
        "--group-size",
        "2",
        "--duration-s",
        "2",
        "--json",
    ],
]
"""No desktop, no model: seconds each."""


def _run(args: list[str], env: dict[str, str], timeout: float) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{args}: {done.stderr[-2000:]}"
    try:
        return json.loads(done.stdout)
    except ValueError as exc:
        raise AssertionError(
            f"{args}: stdout is not one JSON document ({exc}): {done.stdout[:500]!r}"
        ) from None


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CUA_RL_STATE_DIR": str(tmp_path / "state"),
        "CUA_RL_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_cheap_commands_print_only_json(env: dict[str, str], tmp_path: Path) -> None:
    RunStore(tmp_path / "run").close()  # an empty run: `runs show` still reports it
    started = time.monotonic()
    results = {
        " ".join(args[:2]): _run(args, env, 60)
        for args in [
            *CHEAP,
            ["runs", "show", str(tmp_path / "run"), "--json"],
            ["vm", "list", "--json"],
        ]
    }
    assert results["tasks list"] and results["vm list"] == []
    assert results["config show"]["episode"]["max_steps"] >= 1
    assert time.monotonic() - started < 60


@pytest.mark.desktop
@pytest.mark.model
def test_the_smallest_benches_print_only_json(
    env: dict[str, str], local_desktops: None, tiny_model_dir: Path
) -> None:
    """The desktop and inference benches at their smallest options, with the libraries
    that write to stdout imported (torch, transformers, deepspeed's accelerator)."""
    started = time.monotonic()
    guest = _run(
        ["bench", "guest", "--calls", "20", "--rows", "5", "--cols", "2", "--json"], env, 120
    )
    desktops = _run(
        ["bench", "desktops", "--provider", "local", "--calls", "5", "--json"], env, 120
    )
    inference = _run(
        [
            "bench",
            "inference",
            "--engines",
            "hf",
            "--concurrency",
            "1",
            "--seconds",
            "1",
            "--max-tokens",
            "2",
            "--model",
            str(tiny_model_dir),
            "--json",
        ],
        env,
        180,
    )
    assert isinstance(guest, dict) and "local" in desktops and "hf" in inference
    print(f"smallest benches: {time.monotonic() - started:.1f} s")
