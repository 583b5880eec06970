"""One real cell of `cua-rl experiment` at quickstart scale: `cua-rl train` to version
1, `export model`, a `rollout` of the exported policy scored into table.json; the
before cell's rollout of the initial policy; and a rerun that runs nothing again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.model]

MOVE_FILES = "48e34106-14b8-569b-87fd-ddb8b69036bc"


def _experiment(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", "experiment", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_one_cell_trains_through_cua_rl_train_and_is_evaluated_once(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    spec = tmp_path / "one-cell.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "one-cell",
                "seeds": [1],
                "baseline": "policy",
                "common": [
                    f"tiny_model_dir={primed_tiny_model_dir}",
                    f"desktops.provider.state_dir={tmp_path / 'state'}",
                    "metrics.live=false",
                    "episode.max_steps=1",
                ],
                # a frozen reward model: its votes give the one-step groups their spread (with
                # the judge off, all-failed groups have no advantage and the update never comes)
                "arms": [
                    {
                        "name": "policy",
                        "preset": "quickstart",
                        "overrides": ["train.prm.enabled=false", "adapt.enabled=false"],
                    }
                ],
                "eval": {
                    "versions": [1],
                    "rollouts": 2,
                    "sets": {"in_domain": [f"tasks.ids=[{MOVE_FILES}]"]},
                },
            }
        )
    )
    out = tmp_path / "exp"
    done = _experiment(str(spec), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[cell 2/2 policy-s1] step 1/3 train@1" in done.stderr
    cell = json.loads((out / "cells" / "policy-s1" / "cell.json").read_text())["steps"]
    assert cell["train@1"]["policy_version"] == 1
    assert cell["eval@1:in_domain"]["n"] == 2  # both rollouts scored
    assert cell["summary"]["runs_show"]["policy_updates"] == 1
    assert (out / "cells" / "policy-s1" / "models" / "policy-v1" / "config.json").is_file()
    # the cell's run is an ordinary train run: runs show reads it
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "runs",
            "show",
            str(out / "cells" / "policy-s1" / "run"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout)["policy_updates"] == 1
    table = json.loads((out / "table.json").read_text())
    rows = {row["arm"]: row for row in table["rows"]}
    for arm in ("before", "policy"):
        entry = rows[arm]["cells"]["in_domain"]
        assert entry["n"] == 1 and 0.0 <= entry["estimate"] <= 1.0
    assert (out / "curves.png").is_file()
    again = _experiment(str(spec), "--out", str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    result = json.loads(again.stdout)
    assert result["cells_skipped"] == 2 and result["steps_run"] == 0
