"""Fixtures shared by integration tests: the tiny model and local desktops."""

from __future__ import annotations

import asyncio
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
def primed_tiny_model_dir() -> Path:
    """The format-primed tiny model (~4 min to build once per machine): its samples
    parse, so runs that train on them see real advantages. The same cached build the
    runs themselves use (`ensure_tiny_model`), so a session never builds it twice."""
    pytest.importorskip("transformers")
    from cua_rl.inference.launcher import default_tiny_dir, ensure_tiny_model

    return asyncio.run(ensure_tiny_model(default_tiny_dir()))


@pytest.fixture(scope="session")
def docker_available(tmp_path_factory: pytest.TempPathFactory):
    """A Docker engine for the session (started here when installed but not running)."""
    from tests_support.images import docker_engine

    with docker_engine(tmp_path_factory.mktemp("dockerd") / "dockerd.log") as reason:
        yield reason


@pytest.fixture(scope="session")
def minimal_docker_image(docker_available: str | None) -> str:
    """Tag of the minimal desktop image (built once, cached by content hash)."""
    from tests_support.images import image_build_unavailable

    if docker_available is not None:
        pytest.skip(docker_available)
    if (reason := image_build_unavailable()) is not None:
        pytest.skip(reason)
    from cua_rl.images.build import build_image

    built = build_image("minimal", "docker")
    assert built.docker_tag is not None
    return built.docker_tag


@pytest.fixture(scope="session")
def minimal_qcow2_image() -> Path:
    """disk.qcow2 of the minimal image (kernel and initrd beside it), built once
    and cached by content hash: the same root file system as the docker image's,
    whose cached base layer makes a guest edit cost seconds, not an mmdebstrap."""
    import shutil

    from tests_support.images import image_build_unavailable

    if (reason := image_build_unavailable()) is not None:
        pytest.skip(reason)
    for tool in ("qemu-system-x86_64", "qemu-img", "mkfs.ext4"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} missing (apt-get install qemu-system-x86 qemu-utils)")
    from cua_rl.images.build import build_image

    return build_image("minimal", "qcow2").qcow2
