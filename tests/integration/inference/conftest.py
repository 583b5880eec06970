"""Fixtures for real model servers on the tiny model: hf processes and a vLLM replica."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real vLLM replica (CPU build) on the tiny model for the whole session, launched
    by an owner process through `model_servers`. At the end the owner is SIGKILLed and
    every vLLM process must follow it (the death signal), else the session errors.

    Tests that change its weights put the tiny checkpoint back before they end."""
    from tests_support.vllm import start_vllm_replica, vllm_unavailable

    if (reason := vllm_unavailable()) is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build vLLM (.ci/run runs ./setup.sh --vllm): {reason}")
        pytest.skip(reason)
    log_dir = tmp_path_factory.mktemp("vllm-logs")
    replica = start_vllm_replica(tiny_model_dir, log_dir, vllm={"max_model_len": 8192})
    assert (log_dir / "vllm-0.log").stat().st_size > 0  # the replica logs under the run dir
    assert replica.pids(), "no process carries the owner's pid: the death signal is unbound"
    yield replica
    left = replica.kill_owner()
    assert not left, f"vLLM processes {left} outlived their SIGKILLed owner"
