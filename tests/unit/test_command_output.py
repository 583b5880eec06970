"""With `--json`, stdout carries the result only: library logs go to stderr."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from cua_rl.command_output import stdout_to_stderr


def test_library_output_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    early = logging.getLogger("lib_imported_before")  # like DeepSpeed's logger
    early.addHandler(logging.StreamHandler(sys.stdout))
    early.setLevel(logging.INFO)
    try:
        with stdout_to_stderr():
            late = logging.getLogger("lib_imported_during")
            late.addHandler(logging.StreamHandler(sys.stdout))
            late.setLevel(logging.INFO)
            early.info("early log line")
            late.info("late log line")
            print("a print")
            os.write(1, b"native write\n")
        print('{"result": 1}')
        late.info("after the run")
    finally:
        early.handlers.clear()
        late.handlers.clear()
    out, err = capfd.readouterr()
    assert out == '{"result": 1}\n'
    for line in ("early log line", "late log line", "a print", "native write", "after the run"):
        assert line in err
