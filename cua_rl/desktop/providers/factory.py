"""The one place that chooses a desktop provider (kept out of `base`, so the base
class never imports its implementations, which all import it)."""

from __future__ import annotations

import importlib

from cua_rl.desktop.providers.base import DesktopProvider
from cua_rl.desktop.providers.config import ProviderConfig

# type -> "module:class" so that a provider's heavy imports happen only when used.
_PROVIDERS: dict[str, str] = {
    "local": "cua_rl.desktop.providers.local.provider:LocalProvider",
    "container": "cua_rl.desktop.providers.container.provider:ContainerProvider",
    "docker": "cua_rl.desktop.providers.container.docker:DockerProvider",
    "qemu": "cua_rl.desktop.providers.qemu.provider:QemuProvider",
    "aws": "cua_rl.desktop.providers.aws.provider:AwsProvider",
}


def make_provider(config: ProviderConfig, *, owner_pid: int | None = None) -> DesktopProvider:
    """The provider that `config.type` names, configured by `config`; desktops it
    starts are bound to `owner_pid` when given (see `DesktopProvider.owner_pid`)."""
    module, attr = _PROVIDERS[config.type].split(":")
    provider: DesktopProvider = getattr(importlib.import_module(module), attr)(config)
    provider.owner_pid = owner_pid
    return provider
