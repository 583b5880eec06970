"""Fixtures shared by integration tests: the tiny model and local desktops."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support.desktops import local_desktops_unavailable


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from cua_rl.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0).path


@pytest.fixture
def local_desktops() -> None:
    """Skip the test with a clear reason when local desktops cannot start."""
    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def primed_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The format-primed tiny model (~4 min to build): its samples parse, so runs
    that train on them see real advantages."""
    pytest.importorskip("transformers")
    from cua_rl.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-primed") / "model", seed=0,
                            primed=True).path
