"""Which no-op agent results the check sets apart as stand-in tasks, from the task
JSON's shape: a GIMP-style postconfig that exports the result by typing its name
makes a 0 as meaningless as a pass when the expected file is a stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from cua_rl.tasks.noop_check import NoopResult, expects_download, exports_by_keystrokes, noop_report
from cua_rl.tasks.osworld import load_osworld
from cua_rl.types import TaskVariant

HUB = "https://huggingface.co/datasets/example/files/resolve/main"


def _pyautogui(script: str) -> dict[str, Any]:
    return {
        "type": "execute",
        "parameters": {"command": ["python3", "-c", f"import pyautogui; {script}"]},
    }


def _task(evaluator: dict[str, Any], task_id: str = "t") -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="gimp",
        evaluator_name="default",
        instruction="x",
        config=(),
        evaluator=evaluator,
    )


# The shape of OSWorld's GIMP tasks (e.g. "mirror my figure"): the postconfig
# focuses a window by a title GIMP does not use, then types Export As.
GIMP_EXPORT = {
    "postconfig": [
        {
            "type": "activate_window",
            "parameters": {"window_name": "GNU Image Manipulation Program"},
        },
        _pyautogui('pyautogui.hotkey(["shift", "ctrl", "e"]);'),
        {"type": "sleep", "parameters": {"seconds": 0.5}},
        _pyautogui('pyautogui.write("berry_mirror");pyautogui.press(["enter"]);'),
    ],
    "func": "check_image_mirror",
    "expected": {"type": "cloud_file", "path": f"{HUB}/gimp/berry.jpeg", "dest": "berry.png"},
    "result": {
        "type": "vm_file",
        "path": "/home/user/Desktop/berry_mirror.png",
        "dest": "berry_mirror.png",
    },
}

# LibreOffice's shape: the postconfig saves the open document with Ctrl+S; the
# result is the file the task opened, which the agent's edits change.
CALC_SAVE = {
    "postconfig": [
        {"type": "activate_window", "parameters": {"window_name": "Sales.xlsx - LibreOffice Calc"}},
        _pyautogui('pyautogui.hotkey("ctrl", "s");'),
    ],
    "func": "compare_table",
    "expected": {"type": "cloud_file", "path": f"{HUB}/calc/Sales_gold.xlsx", "dest": "g.xlsx"},
    "result": {"type": "vm_file", "path": "/home/user/Sales.xlsx", "dest": "Sales.xlsx"},
}

# A shell export: deterministic, no keyboard focus involved.
SHELL_ZIP = {
    "postconfig": [
        {
            "type": "execute",
            "parameters": {
                "command": ["/bin/bash", "-c", "cd /home/user/book && zip -qr book.zip *.pdf"]
            },
        }
    ],
    "func": "compare_archive",
    "expected": {"type": "cloud_file", "path": f"{HUB}/multi/book.zip", "dest": "gold.zip"},
    "result": {"type": "vm_file", "path": "/home/user/book/book.zip", "dest": "book.zip"},
}


def test_keystroke_export_is_recognised_from_the_task_shape() -> None:
    assert exports_by_keystrokes(_task(GIMP_EXPORT))
    assert expects_download(_task(GIMP_EXPORT))
    # A list of result getters and paths (multi-file results) is searched too.
    listed = {
        **GIMP_EXPORT,
        "func": ["check_image_mirror"],
        "result": [
            {
                "type": "vm_file",
                "multi": True,
                "path": ["/tmp/other.png", "/home/user/Desktop/berry_mirror.png"],
            }
        ],
    }
    assert exports_by_keystrokes(_task(listed))
    assert not exports_by_keystrokes(_task(CALC_SAVE))
    assert not exports_by_keystrokes(_task(SHELL_ZIP))
    assert not exports_by_keystrokes(_task({"func": "infeasible"}))


def test_a_zero_from_a_keystroke_export_against_a_standin_is_reported_apart() -> None:
    gimp = NoopResult(
        "gimp",
        infeasible=False,
        success_score=0.0,
        failure_score=0.0,
        standin_expected=True,
        exported_by_postconfig=True,
        detail="metric 'check_image_mirror' scored 0: result file not found",
    )
    calc = NoopResult(
        "calc", infeasible=False, success_score=0.0, failure_score=0.0, standin_expected=True
    )
    passed = NoopResult(
        "pass", infeasible=False, success_score=1.0, failure_score=0.0, standin_expected=True
    )
    own_gold = NoopResult(
        "own", infeasible=False, success_score=0.0, failure_score=0.0, exported_by_postconfig=True
    )  # no downloaded expected file
    assert gimp.standin_apart and not gimp.wrong
    assert "result file not found" in gimp.apart_reason
    assert passed.standin_apart and not calc.standin_apart and not own_gold.standin_apart
    report = noop_report([gimp, calc, passed, own_gold])
    assert set(report["standin_expected"]) == {"gimp", "pass"}
    assert report["offenders"] == {}
    assert report["success_run_scored_0"] == 3


def test_a_keystroke_export_that_errs_or_misjudges_failure_stays_an_offender() -> None:
    errored = NoopResult(
        "err",
        infeasible=False,
        standin_expected=True,
        exported_by_postconfig=True,
        error="GuestError: boom",
    )
    wrong_failure = NoopResult(
        "fail",
        infeasible=False,
        success_score=0.0,
        failure_score=1.0,
        standin_expected=True,
        exported_by_postconfig=True,
    )
    report = noop_report([errored, wrong_failure])
    assert set(report["offenders"]) == {"err", "fail"}
    assert report["standin_expected"] == {}


@pytest.mark.shared
def test_osworld_gimp_exports_are_detected(osworld_dir) -> None:
    # The two GIMP tasks whose eval passes on stand-in gold files the check once missed.
    tasks = {t.task_id[:8]: t for t in load_osworld(osworld_dir).tasks}
    for short in ("72f83cdc", "2a729ded"):
        assert exports_by_keystrokes(tasks[short]) and expects_download(tasks[short]), short
