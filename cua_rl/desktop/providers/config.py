"""`ProviderConfig`: the union of every provider's config, selected by its `type`.

Kept apart from `base.py` (the provider contract and factory, which import the guest
client) so that loading a run's configuration imports no HTTP code.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cua_rl.desktop.providers.aws.config import AwsProviderConfig
from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.docker_config import DockerProviderConfig
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.qemu.config import QemuProviderConfig

# The union grows one member per provider; the
# `type` field selects the member, so YAML reads `provider: {type: local, ...}`.
ProviderConfig = Annotated[
    LocalProviderConfig
    | ContainerProviderConfig
    | DockerProviderConfig
    | QemuProviderConfig
    | AwsProviderConfig,
    Field(discriminator="type"),
]
