"""Every variant of the local task suite on real local desktops: the golden
solution scores 1 and the untouched initial state scores 0
(`cua-rl templates validate --on-desktop`, docs/architecture.md, authoring task pairs)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess

import pytest

from cua_rl.tasks.check_jobs import suite_groups
from cua_rl.tasks.golden_files import read_golden
from cua_rl.tasks.on_desktop import validate_on_desktop
from cua_rl.tasks.sources import DATA_ROOT, LOCAL_SUITE

pytestmark = pytest.mark.desktop

SUITE, REPO = LOCAL_SUITE, DATA_ROOT  # the suite and its pairs' root
TOOLS = ("Xvfb", "unshare", "openbox", "xdotool", "wmctrl", "soffice", "mousepad", "gimp")


def _missing() -> str | None:
    """Why this machine cannot run the suite, or None."""
    tools = [t for t in TOOLS if shutil.which(t) is None]
    if tools:
        return f"missing on PATH: {', '.join(tools)} (run ./setup.sh)"
    if importlib.util.find_spec("cua_guest") is None:
        return "cua_guest is not importable (pip install -e vm/guest)"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "true"], capture_output=True
    )
    if probe.returncode != 0:
        return "cannot create mount namespaces (needs root or CAP_SYS_ADMIN)"
    return None


def test_local_suite_on_desktops():
    reason = _missing()
    if reason:
        pytest.skip(reason)
    desktops = int(os.environ.get("CUA_RL_TEST_DESKTOPS", "2"))
    report = validate_on_desktop(suite_groups(SUITE, REPO), desktops=desktops)
    lines = [f.line() for f in report.failures]
    assert not lines, "\n".join(lines)
    assert len(report.outcomes) >= 2 * 24  # an initial and a golden check per task at least


def test_expected_files_are_made_at_evaluation_not_at_setup():
    """The agent acts between setup and postconfig: it must not find the answer."""
    for task, variants in suite_groups(SUITE, REPO):
        assert "/tmp/.cua_expected" not in json.dumps(task.config), task.task_id
        for v in variants:
            if "/tmp/.cua_expected" in json.dumps(v.evaluator.get("expected")):
                assert v.evaluator.get("postconfig"), (task.task_id, v.evaluator_name)


def test_gui_goldens_space_their_key_events():
    """Keys typed in a burst share X timestamps and get dropped under load (docs/figures.md)."""
    calls = re.compile(r"pyautogui\.(write|press|hotkey)\((.*?)\)(;|$)")
    for task, _ in suite_groups(SUITE, REPO):
        for name, steps in read_golden(task).items():
            for step in steps:
                for call in calls.finditer(step.get("pyautogui", "")):
                    assert "interval=" in call.group(2), (task.task_id, name, call.group(0))
