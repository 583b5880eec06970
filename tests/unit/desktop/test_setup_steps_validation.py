"""Shapes of setup/postconfig steps, checked without a desktop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cua_rl.desktop.setup_steps import (
    SETUP_STEPS,
    SetupContext,
    parse_setup_step,
    substitute_placeholders,
    validate_setup_steps,
)
from cua_rl.errors import SetupStepError

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"

# Step types the OSWorld task files use that this module does not implement:
# Chrome over CDP (playwright), Google Drive and website logins need host-side
# credentials or a browser driver and belong to later work.
UNIMPLEMENTED_IN_OSWORLD = {
    "chrome_open_tabs",
    "chrome_close_tabs",
    "googledrive",
    "login",
    "update_browse_history",
}

GOOD: list[tuple[str, dict[str, Any]]] = [
    ("download", {"files": [{"url": "https://h/a.xlsx", "path": "/home/user/a.xlsx"}]}),
    ("download", {"files": []}),
    ("upload_file", {"files": [{"local_path": "assets/a.txt", "path": "/tmp/a.txt"}]}),
    ("open", {"path": "/home/user/a.xlsx"}),
    ("launch", {"command": ["libreoffice", "--calc"]}),
    ("launch", {"command": "code --new-window", "shell": True}),
    ("execute", {"command": ["python", "-c", "print(1)"], "stdout": "out.txt"}),
    ("execute", {"command": "echo {CLIENT_PASSWORD} | sudo -S true", "shell": "true"}),
    ("execute", {"command": ["true"], "until": {"returncode": 0}}),
    ("command", {"command": ["ls"], "stderr": "err.txt"}),
    (
        "execute_with_verification",
        {"command": ["gedit"], "verification": {"window_exists": "gedit"}, "max_wait_time": 5},
    ),
    ("sleep", {"seconds": 1}),
    ("sleep", {"seconds": 0.5}),
    ("activate_window", {"window_name": "Untitled 1 - LibreOffice Calc", "strict": True}),
    ("close_window", {"window_name": "Mail.thunderbird", "strict": True, "by_class": True}),
    ("change_wallpaper", {"path": "/home/user/w.png"}),
]

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("download", {}, "parameters.files"),
    ("download", {"files": [{"url": "https://h/a"}]}, "parameters.files[0].path"),
    ("download", {"files": [{"url": 3, "path": "/a"}]}, "parameters.files[0].url"),
    ("download", {"files": "https://h/a"}, "parameters.files"),
    ("upload_file", {"files": [{"path": "/a"}]}, "parameters.files[0].local_path"),
    ("open", {}, "parameters.path"),
    ("open", {"path": ""}, "parameters.path"),
    ("launch", {"command": []}, "parameters.command"),
    ("launch", {"command": ["a", 1]}, "parameters.command"),
    ("launch", {"command": ["a"], "shel": True}, "parameters.shel"),
    ("execute", {}, "parameters.command"),
    ("execute", {"command": ["x"], "stdout": "../escape.txt"}, "parameters.stdout"),
    ("execute", {"command": ["x"], "until": {"exit": 0}}, "parameters.until.exit"),
    ("command", {"command": 5}, "parameters.command"),
    (
        "execute_with_verification",
        {"command": ["x"], "max_wait_time": 0},
        "parameters.max_wait_time",
    ),
    ("sleep", {}, "parameters.seconds"),
    ("sleep", {"seconds": "2"}, "parameters.seconds"),
    ("sleep", {"seconds": True}, "parameters.seconds"),
    ("sleep", {"seconds": -1}, "parameters.seconds"),
    ("activate_window", {"strict": True}, "parameters.window_name"),
    ("activate_window", {"window_name": "x", "strict": "maybe"}, "parameters.strict"),
    ("close_window", {"window_name": ["x"]}, "parameters.window_name"),
    ("change_wallpaper", {"path": None}, "parameters.path"),
]


BUILTIN = {
    "download",
    "upload_file",
    "open",
    "launch",
    "execute",
    "command",
    "execute_with_verification",
    "sleep",
    "activate_window",
    "close_window",
    "change_wallpaper",
}


def test_every_builtin_type_is_registered_and_has_good_and_bad_cases() -> None:
    assert BUILTIN <= set(SETUP_STEPS)
    assert {kind for kind, _ in GOOD} == BUILTIN
    assert {kind for kind, _, _ in BAD} == BUILTIN


@pytest.mark.parametrize(
    ("kind", "params"), GOOD, ids=[f"{k}-{i}" for i, (k, _) in enumerate(GOOD)]
)
def test_good_shapes_parse(kind: str, params: dict[str, Any]) -> None:
    name, _, parsed = parse_setup_step({"type": kind, "parameters": params}, where="t", index=0)
    assert name == kind
    assert validate_setup_steps([{"type": kind, "parameters": params}], where="t") == []
    assert parsed.model_dump(exclude_defaults=True).keys() <= params.keys()


@pytest.mark.parametrize(
    ("kind", "params", "field"), BAD, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BAD)]
)
def test_bad_shapes_name_task_index_and_field(
    kind: str, params: dict[str, Any], field: str
) -> None:
    steps = [{"type": "sleep", "parameters": {"seconds": 0}}] * 2
    steps = [*steps, {"type": kind, "parameters": params}]
    with pytest.raises(SetupStepError) as info:
        for i, step in enumerate(steps):
            parse_setup_step(step, where="task abc: config", index=i)
    message = str(info.value)
    assert message.startswith(f"task abc: config[2] ('{kind}'): ")
    assert f"field '{field}'" in message
    [problem] = validate_setup_steps(steps, where="task abc: config")
    assert problem == message


def test_shell_written_as_string_true_is_read_as_bool() -> None:
    _, _, parsed = parse_setup_step(
        {"type": "execute", "parameters": {"command": "ls", "shell": "true"}}, where="t", index=0
    )
    assert parsed.shell is True  # type: ignore[attr-defined]


def test_unknown_type_names_task_index_and_known_types() -> None:
    steps = [
        {"type": "sleep", "parameters": {"seconds": 0}},
        {"type": "teleport", "parameters": {}},
    ]
    [problem] = validate_setup_steps(steps, where="task t1: evaluator.postconfig")
    assert problem.startswith("task t1: evaluator.postconfig[1]: unknown step type 'teleport'")
    assert "download" in problem and "activate_window" in problem


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("not a dict", "expected an object with 'type' and 'parameters'"),
        ({"parameters": {}}, "field 'type'"),
        ({"type": "sleep", "parameters": [1]}, "field 'parameters': expected an object"),
    ],
)
def test_malformed_step_objects(step: Any, expected: str) -> None:
    [problem] = validate_setup_steps([step], where="w")
    assert problem.startswith("w[0]") and expected in problem


def test_step_list_itself_must_be_a_list() -> None:
    assert validate_setup_steps(None, where="w") == []
    assert validate_setup_steps({"type": "sleep"}, where="w") == [
        "w: expected a list of steps, got dict"
    ]


def test_placeholders_are_substituted_in_every_string() -> None:
    ctx = SetupContext(screen_width=1280, screen_height=721, client_password="pw")
    command = [
        "python",
        "-c",
        "import pyautogui; pyautogui.click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF})",
        "{SCREEN_WIDTH}x{SCREEN_HEIGHT}",
        "{CLIENT_PASSWORD}",
        "{}",
        "{OTHER}",
    ]
    assert substitute_placeholders(command, ctx) == [
        "python",
        "-c",
        "import pyautogui; pyautogui.click(640, 360)",
        "1280x721",
        "pw",
        "{}",
        "{OTHER}",
    ]
    assert (
        substitute_placeholders("echo {CLIENT_PASSWORD} | sudo -S x", ctx) == "echo pw | sudo -S x"
    )
    assert SetupContext(screen_width=1920, screen_height=1080).client_password == "password"


@pytest.mark.shared
def test_all_osworld_task_steps_validate_or_are_reported() -> None:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    unknown: set[str] = set()
    tasks = 0
    for path in sorted((OSWORLD / "examples").glob("*/*.json")):
        task = json.loads(path.read_text())
        tasks += 1
        lists = {
            "config": task.get("config"),
            "evaluator.postconfig": task.get("evaluator", {}).get("postconfig"),
        }
        for phase, steps in lists.items():
            for problem in validate_setup_steps(steps, where=f"{path}: {phase}"):
                assert "unknown step type" in problem, problem
                unknown.add(problem.split("unknown step type '")[1].split("'")[0])
    assert tasks == 369
    # types registered later by other modules drop out of the unknown set
    assert unknown == UNIMPLEMENTED_IN_OSWORLD - set(SETUP_STEPS)
