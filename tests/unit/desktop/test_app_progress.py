"""Which `ps` lines count as a process of a command a setup launched
(`app_progress.runs_launched`): activate_window waits while one runs."""

from __future__ import annotations

import pytest

from cua_rl.desktop.setup_steps.app_progress import launched_text, runs_launched


@pytest.mark.parametrize(
    "line, text",
    [
        ("true", "true"),
        (
            "sh -c sleep 4; exec xmessage -title quiet-app ready",
            "sleep 4; exec xmessage -title quiet-app ready",
        ),
        ("/bin/sh -c libreoffice --calc", "libreoffice --calc"),
        ("/usr/bin/code /home/user/project", "code /home/user/project"),
        ("/bin/bash /usr/share/code/bin/code --wait", "code --wait"),
        ("gimp /home/user/a.png --no-splash", "gimp /home/user/a.png"),
        ("/usr/bin/gimp /home/user/a.png --no-splash", "gimp /home/user/a.png"),
    ],
)
def test_a_launched_command_is_found(line: str, text: str) -> None:
    assert runs_launched(line, text)


@pytest.mark.parametrize(
    "line, text",
    [
        ("bash -c make || true", "true"),
        ("bash -c while true; do sleep 1; done", "true"),
        ("dockerd --userns-remap=true", "true"),
        ("python -m pytest --flag=true tests", "true"),
        ("struecode --wait", "code --wait"),
        ("", "true"),
        ("true", ""),
    ],
)
def test_a_command_named_inside_another_is_not(line: str, text: str) -> None:
    assert not runs_launched(line, text)


def test_launched_text_is_how_ps_shows_the_command() -> None:
    assert launched_text("  gedit a.txt ", shell=True) == "gedit a.txt"
    assert launched_text(["/usr/bin/code", "--wait"], shell=False) == "code --wait"
    assert launched_text([], shell=False) == ""
