"""`cua-rl tasks verify --provider container` (issue 50's CI sample): three goldens
that proved themselves on local desktops, on container desktops of the minimal image
the container tests already build (no image of its own): a `sudo -S mkdir` setup (the
rootless sudo), PulseAudio's null sink below full volume, and a `sudo apt install xsel`
setup with a clipboard the golden fills. Each must pass both halves, as on local
desktops. The full run over every golden, on the `full` image, is the command itself
(docs/osworld-local.md, "Per provider")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.asset_files import standin_cache

from cua_rl.tasks.sources import load_source

pytestmark = [pytest.mark.desktop, pytest.mark.shared]

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"
SAMPLE = (
    "e0df059f-28a6-4169-924f-b9623e7184cc",  # os: sudo -S mkdir, then mv
    "28cc3b7e-b194-4bc9-8353-d04c0f4d56d2",  # os: the volume to 100 %
    "716a6079-22da-47f1-ba73-c9d58f986a38",
)  # multi_apps: sudo apt install xsel


def test_three_goldens_pass_on_container_desktops(
    tmp_path: Path, minimal_docker_image: str
) -> None:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    load = load_source(f"osworld:{OSWORLD}")
    cache = standin_cache([t for t in load.tasks if t.task_id in SAMPLE], tmp_path / "assets")
    from cua_rl.cli import cli

    args = [
        "tasks",
        "verify",
        "--osworld",
        str(OSWORLD),
        "--cache",
        str(cache.root),
        "--provider",
        "container",
        "--image",
        minimal_docker_image,
        "--profile",
        "minimal",
        "--out",
        str(tmp_path / "report"),
        "--desktops",
        "2",
        "--json",
    ]
    for task_id in SAMPLE:
        args += ["--task", task_id]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["provider"], summary["image"]) == ("container", minimal_docker_image)
    statuses = {v["task_id"]: (v["status"], v["reason"]) for v in summary["verdicts"]}
    assert statuses == {task_id: ("pass", "") for task_id in SAMPLE}
    assert "on container desktops" in (tmp_path / "report" / "verify.md").read_text()
