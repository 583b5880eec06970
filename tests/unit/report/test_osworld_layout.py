"""A stored evaluation in OSWorld's results layout: OSWorld's own reader (re-implemented
in tests_support) gives the per-domain rates of report.json; the folders hold what
OSWorld's lib_run_single.py writes; `cua-rl export osworld-results` writes it for an
existing run, keeping what is already there; our reader reads it back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.eval_runs import build_eval_run, manifest_of
from tests_support.osworld_show_result import show_result

from cua_rl.cli import cli
from cua_rl.report.eval_report import build_report, records_from_store
from cua_rl.report.osworld_layout import model_folder_name, write_osworld_results
from cua_rl.store.run_store import RunStore
from cua_rl.tasks.osworld_results import read_results, read_trajectory

SCORES = {
    "c1": ("libreoffice_calc", [1.0, 1.0]),
    "c2": ("libreoffice_calc", [0.0, 1.0]),
    "o1": ("os", [0.0, 0.0]),
    "o2": ("os", [1.0, 0.0]),
    "g1": ("gimp", [0.5, 1.0]),
    "v1": ("vlc", []),  # its setup failed: no folder, as in OSWorld
}
STEP_PNG = re.compile(r"^step_(\d+)_\d{8}@\d{6}\.png$")


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, dict]:
    run_dir = build_eval_run(
        tmp_path / "run",
        SCORES,
        setup_failed=["v1"],
        manifest=manifest_of(model="Org/My-Model 7B", runs=2),
    )
    (run_dir / "recordings").mkdir()
    (run_dir / "recordings" / "c1-0.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 a recording")
    store = RunStore.read_only(run_dir)
    try:
        report = build_report(
            records_from_store(store), {t: d for t, (d, _) in SCORES.items()}, runs=2
        )
    finally:
        store.close()
    return run_dir, report


def test_osworlds_reader_gives_the_rates_of_report_json(
    run: tuple[Path, dict], tmp_path: Path
) -> None:
    run_dir, report = run
    store = RunStore.read_only(run_dir)
    try:
        written = write_osworld_results(store, report, tmp_path / "layout", "Org/My-Model 7B")
    finally:
        store.close()
    assert (written.written, written.kept, written.missing_screenshots) == (10, 0, 0)
    model = model_folder_name("Org/My-Model 7B")
    assert model == "My-Model_7B"
    per_run = [
        show_result(str(tmp_path / "layout" / f"run-{k}"), "pyautogui", model, "screenshot")
        for k in (0, 1)
    ]
    for domain, row in report["domains"].items():
        if row["mean"] is None:  # vlc: no scored run, no folder
            assert all(domain not in rates for rates, _ in per_run)
            continue
        mean_of_runs = sum(rates[domain] for rates, _ in per_run) / 2
        assert mean_of_runs == pytest.approx(row["mean"]), domain
    overall = sum(total for _, total in per_run) / 2
    assert overall == pytest.approx(report["overall"]["mean"])


def test_each_task_folder_holds_what_lib_run_single_writes(
    run: tuple[Path, dict], tmp_path: Path
) -> None:
    run_dir, report = run
    store = RunStore.read_only(run_dir)
    try:
        write_osworld_results(store, report, tmp_path / "layout", "m")
    finally:
        store.close()
    folder = (
        tmp_path / "layout" / "run-0" / "pyautogui" / "screenshot" / "m" / "libreoffice_calc" / "c1"
    )
    assert (folder / "result.txt").read_text() == "1.0\n"
    assert (folder / "recording.mp4").read_bytes().startswith(b"\x00\x00\x00\x18ftyp")
    lines, problems = read_trajectory(folder)
    assert problems == []
    assert [line["step_num"] for line in lines] == [1, 2]
    assert lines[0]["action"] == "pyautogui.click(10, 20)" and lines[0]["done"] is False
    assert lines[1]["action"] == "DONE" and lines[1]["done"] is True  # a declared success
    assert set(lines[0]) == {
        "step_num",
        "action_timestamp",
        "action",
        "response",
        "reward",
        "done",
        "info",
        "screenshot_file",
    }
    for line in lines:
        assert STEP_PNG.match(line["screenshot_file"])
        assert line["screenshot_file"].endswith(f"_{line['action_timestamp']}.png")
        # the agent saw JPEG; OSWorld's folders hold PNG of the same screen
        assert (folder / line["screenshot_file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    failed = folder.parents[1] / "os" / "o1"
    assert (failed / "result.txt").read_text() == "0.0\n"
    assert [line["action"] for line in read_trajectory(failed)[0]] == [
        "pyautogui.click(10, 20)",
        "pyautogui.click(11, 20)",
    ]
    assert not (folder.parents[1] / "vlc").exists()

    back = read_results(tmp_path / "layout")
    assert back.problems == [] and back.models == ["m"]
    assert back.scores() == {t: dict(enumerate(s)) for t, (_, s) in SCORES.items() if s}
    assert {e.action_space for e in back.examples} == {"pyautogui"}


def test_export_writes_an_existing_run_and_keeps_what_is_there(run: tuple[Path, dict]) -> None:
    run_dir, _ = run
    runner = CliRunner()
    first = runner.invoke(cli, ["export", "osworld-results", str(run_dir), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == {
        "out": str(run_dir / "osworld-results"),
        "written": 10,
        "kept": 0,
        "missing_screenshots": 0,
    }
    model = run_dir / "osworld-results" / "run-1" / "pyautogui" / "screenshot" / "My-Model_7B"
    assert (model / "gimp" / "g1" / "result.txt").read_text() == "1.0\n"
    again = runner.invoke(cli, ["export", "osworld-results", str(run_dir), "--json"])
    assert json.loads(again.stdout)["kept"] == 10

    empty = run_dir.parent / "not-eval"
    RunStore(empty).close()
    refused = runner.invoke(cli, ["export", "osworld-results", str(empty)])
    assert refused.exit_code == 1 and "no scored evaluation task run" in refused.output
