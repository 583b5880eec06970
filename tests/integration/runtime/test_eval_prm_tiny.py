"""`cua-rl eval-prm` with the tiny model: judged through the project's own launcher
(`--model`), labelled by the tiny model on a `cua-rl serve --engine hf` endpoint on
127.0.0.1 (`--label-url`). The first run records every step's votes and their
majority; the second, with the labelling endpoint stopped, asks nobody anything and
reports the same (about 15 s)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support.held_out_runs import Planned, build_held_out_run
from tests_support.servers import start_hf_server

from cua_rl.reward.accuracy import majority_label

pytestmark = pytest.mark.model

PLAN = (Planned("ta1", "a", 2, 1.0), Planned("tb1", "b", 2, 0.0))
LABEL_VOTES = 3


def _eval_prm(run: Path, out: Path, model: Path, label_url: str) -> dict:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "eval-prm",
            str(run),
            "--out",
            str(out),
            "--model",
            str(model),
            "--votes",
            "2",
            "--max-tokens",
            "24",
            "--label-url",
            label_url,
            "--label-model",
            "tiny-labeller",
            "--label-votes",
            str(LABEL_VOTES),
            "--label-max-tokens",
            "24",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _stored_votes(out: Path, role: str) -> dict[tuple[str, int], tuple[list[int], int | None]]:
    db = sqlite3.connect(out / "votes.sqlite")
    try:
        rows = db.execute(
            "SELECT s.trajectory_id, s.step_index, s.scores_json, s.majority "
            "FROM step_votes s JOIN voters v ON v.voter_key = s.voter_key "
            "WHERE json_extract(v.identity_json, '$.role') = ?",
            (role,),
        ).fetchall()
    finally:
        db.close()
    return {(t, i): (json.loads(scores), majority) for t, i, scores, majority in rows}


def test_labels_from_the_tiny_model_are_recorded_and_reused(
    tmp_path: Path, primed_tiny_model_dir: Path
) -> None:
    build_held_out_run(tmp_path / "run", PLAN).close()
    out = tmp_path / "out"
    server = start_hf_server(primed_tiny_model_dir, tmp_path)
    try:
        first = _eval_prm(tmp_path / "run", out, primed_tiny_model_dir, server.url)
    finally:
        server.kill()
    steps = {(p.tid, i) for p in PLAN for i in range(p.steps)}
    labels = _stored_votes(out, "labeller")
    assert set(labels) == steps
    for scores, majority in labels.values():
        assert len(scores) == LABEL_VOTES and set(scores) <= {-1, 0, 1}
        assert majority == majority_label(scores)
    judged = _stored_votes(out, "judge")
    assert set(judged) == steps and all(len(s) == 2 for s, _ in judged.values())
    assert first["labels"]["requests"] == len(steps) and first["labels"]["cached_steps"] == 0
    o = first["overall"]
    assert o["steps"] == len(steps) and o["failed_requests"] == 0
    assert o["labelled"] + o["label_ties"] == len(steps)
    assert o["label_failed_requests"] == 0

    # the labelling endpoint is gone: every vote comes from the cache, no model starts
    second = _eval_prm(tmp_path / "run", out, primed_tiny_model_dir, server.url)
    assert second["overall"] == o and second["failures_total"] == 0
    assert second["labels"]["requests"] == 0 and second["labels"]["cached_steps"] == len(steps)
    assert second["judge"]["requests"] == 0 and second["judge"]["cached_steps"] == len(steps)
