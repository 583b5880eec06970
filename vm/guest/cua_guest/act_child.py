"""The persistent /act worker: a Python process that imported pyautogui once.

Run as `python -m cua_guest.act_child`. Protocol: one JSON object per line on
stdin ({"code": str}), one JSON object per line on a private copy of stdout
({"status", "output", "error"}). The first line written is a readiness message.
Real fd 1 is pointed at stderr so stray C-level writes cannot corrupt replies;
print() inside the code is captured per request.

Deliberately imports nothing from cua_guest: it must start fast and stay small.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import signal
import sys
import time
import traceback
from typing import Any, TextIO

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL us when the guest dies, even if we are stuck in a loop;
    and turn non-dumpable, so other processes of the desktop cannot open our reply
    pipe through /proc/PID/fd and forge or corrupt /act answers."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _reply(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def _run(code: str, pyautogui: Any) -> dict[str, Any]:
    """Execute one action's code in a fresh namespace and report what happened."""
    captured = io.StringIO()
    # the host's action code expects `pyautogui` and `time` in scope (a computer_use
    # `wait` is `time.sleep(...)`; agent/pyautogui_code.py)
    namespace: dict[str, Any] = {"__name__": "__act__", "pyautogui": pyautogui, "time": time}
    try:
        compiled = compile(code, "<act>", "exec")
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            exec(compiled, namespace)  # noqa: S102 - running the agent's code is the job
    except BaseException:  # noqa: BLE001 - SystemExit etc. are the code's result, not ours
        return {"status": "error", "output": captured.getvalue(), "error": traceback.format_exc()}
    return {"status": "success", "output": captured.getvalue(), "error": ""}


def main() -> None:
    _die_with_parent()
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        import pyautogui

        pyautogui.PAUSE = 0
        pyautogui.FAILSAFE = False
        pyautogui.DARWIN_CATCH_UP_TIME = 0
    except BaseException:  # noqa: BLE001 - reported to the guest, which answers 503
        _reply(channel, {"ready": False, "error": traceback.format_exc()})
        return
    _reply(channel, {"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        try:
            request = json.loads(line)
            code = request["code"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            _reply(channel, {"status": "error", "output": "", "error": f"bad request: {exc}"})
            continue
        _reply(channel, _run(code, pyautogui))


if __name__ == "__main__":
    main()
