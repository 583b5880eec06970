"""Fixtures for real `cua-rl serve --engine hf` processes on the tiny model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_support.servers import start_hf_server


@pytest.fixture(scope="module")
def hf_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = start_hf_server(tiny_model_dir, tmp_path_factory.mktemp("logs"))
    yield server
    server.kill()


@pytest.fixture
def server_factory(tiny_model_dir: Path, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    started: list[Any] = []

    def factory() -> Any:
        started.append(start_hf_server(tiny_model_dir, tmp_path))
        return started[-1]

    yield factory
    for server in started:
        server.kill()
