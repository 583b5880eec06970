"""Fixtures shared by integration tests: the tiny model and local desktops."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from cua_rl.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0).path


@functools.cache
def local_desktops_unavailable() -> str | None:
    """Why local desktops cannot run here, or None when they can."""
    missing = [t for t in ("Xvfb", "openbox", "unshare") if shutil.which(t) is None]
    if missing:
        return f"desktop tools missing: {', '.join(missing)} (run ./setup.sh)"
    if importlib.util.find_spec("cua_guest") is None:
        return "cua_guest is not importable (pip install -e vm/guest)"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create mount namespaces here: {probe.stderr.strip()}"
    return None


@pytest.fixture
def local_desktops() -> None:
    """Skip the test with a clear reason when local desktops cannot start."""
    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def primed_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The format-primed tiny model (~2.5 min to build): its samples parse, so runs
    that train on them see real advantages."""
    pytest.importorskip("transformers")
    from cua_rl.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-primed") / "model", seed=0,
                            primed=True).path
