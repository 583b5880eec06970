"""The container provider's command line: no network, no privileges, limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.desktop.providers.container import ContainerProvider
from cua_rl.desktop.providers.container_config import ContainerProviderConfig
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.errors import DesktopError


def provider(tmp_path: Path, **kw) -> ContainerProvider:
    return ContainerProvider(ContainerProviderConfig(state_dir=tmp_path, engine="docker", **kw))


def test_run_argv_isolates_and_limits_the_desktop(tmp_path: Path) -> None:
    argv = provider(tmp_path, cpus=1.5, memory="3g", image="img:1").run_argv("d1", 41000)
    joined = " ".join(argv)
    assert argv[:2] == ["docker", "run"] and argv[-1] == "img:1"
    assert "--network none" in joined and "--cap-drop ALL" in joined
    assert "--user 1000:1000" in joined and "no-new-privileges" in joined
    assert "--cpus 1.5" in joined and "--memory 3g" in joined and "--pids-limit" in joined
    assert "--label cua-rl.desktop=d1" in joined and "--label cua-rl.port=41000" in joined
    assert f"{tmp_path}/d1/run:/run/cua" in joined
    assert "-p" not in argv and "--publish" not in argv


@pytest.mark.parametrize("arg", ["--network=host", "--privileged", "--cap-add"])
def test_extra_args_cannot_open_the_sandbox(tmp_path: Path, arg: str) -> None:
    with pytest.raises(DesktopError, match="may not contain"):
        provider(tmp_path, extra_args=[arg]).run_argv("d1", 41000)


def test_registry_builds_it_from_config() -> None:
    from pydantic import TypeAdapter

    from cua_rl.desktop.providers.config import ProviderConfig

    config = TypeAdapter(ProviderConfig).validate_python({"type": "container",
                                                          "engine": "docker"})
    assert isinstance(make_provider(config, owner_pid=1), ContainerProvider)
