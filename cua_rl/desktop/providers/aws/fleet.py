"""User data and tags of a fleet host (`image_kind: fleet-host`): one EC2 instance
running `desktops_per_instance` (K) container desktops of our image.

The launching host makes K+1 TLS pairs (one per desktop slot, one for the
instance's control endpoint) and puts them in the user data with the slot
tokens (each an HMAC of the run's token and that slot's fingerprint, as for
`image_kind: cua`) and the control token (the same derivation from the control
fingerprint). The fingerprints go on the instance as tags `cua-rl:tls-<i>` and
`cua-rl:tls-control`, which every process of the run pins.

On the instance (cloud-init `runcmd`), `cua-fleet-host` installs the engine with
no bridge network, gets the image (pull, or build from a checkout), runs K
containers through `cua-fleet-desktop <i>` (`--network none`, no capabilities but
the root init's SETUID/SETGID, limits, the container provider's seccomp profile; the
guest on a Unix socket the image's root init binds in the slot's root-owned run dir,
as container desktops do) and starts the agent
(aws/fleet_agent.py): slot i is served over TLS on `guest_port + i`, and its
remote operations, on `control_port`, are a slot's reset and the slot leases
(claim, release) that keep two processes of a run from taking one slot. A desktop
cannot read the user data: its container has no network, so no metadata service.

The user data is gzip-compressed (cloud-init accepts it so): K PEM pairs and the
agent fit EC2's 16 KiB limit up to K = 16 only that way.
"""

from __future__ import annotations

import gzip
import json
import shlex
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import yaml

from cua_rl.desktop.providers.aws.config import AwsProviderConfig
from cua_rl.desktop.providers.aws.tls import USER_DATA_LIMIT, GuestPair, _Dumper, instance_token
from cua_rl.desktop.providers.container.seccomp import profile_text
from cua_rl.errors import DesktopError

ETC = "/etc/cua-fleet"
STATE = "/var/lib/cua-fleet"
AGENT = "/usr/local/lib/cua-fleet/agent.py"
DESKTOP_SCRIPT = "/usr/local/sbin/cua-fleet-desktop"
HOST_SCRIPT = "/usr/local/sbin/cua-fleet-host"
TAG_SLOT = "cua-rl:slot-"
"""`cua-rl:slot-<i>` = the desktop id holding slot i (absent: the slot is free)."""
TAG_TLS_SLOT = "cua-rl:tls-"
"""`cua-rl:tls-<i>` = SHA-256 of slot i's certificate; `cua-rl:tls-control` the agent's."""
TAG_KIND = "cua-rl:kind"


@dataclass(frozen=True, slots=True)
class FleetLaunch:
    """What one fleet host is launched with: a pair per slot, the control endpoint's
    pair, and the desktop that takes slot 0."""

    slots: list[GuestPair]
    control: GuestPair
    first_desktop: str


DESKTOP_SH = r"""#!/bin/sh
# cua-fleet-desktop SLOT: (re)start slot SLOT's desktop as a new container of the
# image: no network, limits, our seccomp profile; the guest on a Unix socket in the
# slot's run dir, which the agent serves over TLS. Every change of the old one is gone.
# The container starts as root with CAP_SETUID/CAP_SETGID only: the image's root init
# binds guest.sock in the root-owned run dir and drops to `user` for good, so nothing
# the agent runs can rename, replace or create anything where the agent connects.
set -eu
. "${CUA_FLEET_ENV:-/etc/cua-fleet/fleet.env}"
slot=${1:-}
case "$slot" in ''|*[!0-9]*) echo "cua-fleet-desktop: SLOT must be a number" >&2; exit 2;; esac
[ "$slot" -lt "$CUA_FLEET_SLOTS" ] || { echo "cua-fleet-desktop: no slot $slot" >&2; exit 2; }
engine=${CUA_FLEET_ENGINE:-docker}
name="$CUA_FLEET_PREFIX$slot"
run="$CUA_FLEET_STATE/slot-$slot/run"
"$engine" rm -f "$name" >/dev/null 2>&1 || true
install -d -m 0755 -o 0 -g 0 "$run"
find "$run" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
install -m 0600 -o 0 -g 0 "$CUA_FLEET_ETC/tokens/slot-$slot" "$run/token"
"$engine" run --detach --init --name "$name" --label "cua-rl.fleet-slot=$slot" \
  --network none --user 0:0 --cap-drop ALL --cap-add SETUID --cap-add SETGID \
  --security-opt no-new-privileges --security-opt "seccomp=$CUA_FLEET_ETC/seccomp.json" \
  --ipc private --cpus "$CUA_FLEET_CPUS" --memory "$CUA_FLEET_MEMORY" --pids-limit 512 \
  --shm-size 256m -e "CUA_SCREEN_WIDTH=$CUA_FLEET_WIDTH" \
  -e "CUA_SCREEN_HEIGHT=$CUA_FLEET_HEIGHT" -e CUA_GUEST_LISTEN=unix:/run/cua/guest.sock \
  -v "$run:/run/cua" "$CUA_FLEET_IMAGE" >/dev/null
"""
HOST_SH = r"""#!/bin/sh
# cua-fleet-host: install the engine (no bridge), get the image, start every slot's
# desktop, then the agent that serves them. Runs once, from cloud-init.
set -eu
. /etc/cua-fleet/fleet.env
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends docker.io python3 python3-venv git \
  ca-certificates mmdebstrap
mkdir -p /etc/docker
printf '{"bridge": "none", "iptables": false, "ip6tables": false}\n' \
  > /etc/docker/daemon.json
systemctl restart docker
if [ -n "$CUA_FLEET_PULL" ]; then
  docker pull "$CUA_FLEET_PULL"
  docker tag "$CUA_FLEET_PULL" "$CUA_FLEET_IMAGE"
else
  python3 -m venv /opt/cua-rl
  [ -d /opt/cua-rl-src ] || git clone --depth 1 "$CUA_FLEET_REPO" /opt/cua-rl-src
  /opt/cua-rl/bin/pip install -q -e /opt/cua-rl-src/vm/guest -e "/opt/cua-rl-src[images]"
  /opt/cua-rl/bin/cua-rl image build --format docker --profile "$CUA_FLEET_PROFILE"
fi
i=0
while [ "$i" -lt "$CUA_FLEET_SLOTS" ]; do /usr/local/sbin/cua-fleet-desktop "$i"; i=$((i + 1)); done
systemd-run --unit cua-fleet-agent --property Restart=always \
  python3 /usr/local/lib/cua-fleet/agent.py /etc/cua-fleet/agent.json
"""


def agent_source() -> str:
    """The agent script's text (embedded in the user data)."""
    return files("cua_rl.desktop.providers.aws").joinpath("fleet_agent.py").read_text()


def fleet_env(config: AwsProviderConfig, etc: str = ETC, state: str = STATE) -> str:
    """`fleet.env`: what both scripts read (shell assignments, values quoted)."""
    values = {
        "CUA_FLEET_SLOTS": config.desktops_per_instance,
        "CUA_FLEET_ETC": etc,
        "CUA_FLEET_STATE": state,
        "CUA_FLEET_PREFIX": "cua-fleet-",
        "CUA_FLEET_IMAGE": config.fleet_image,
        "CUA_FLEET_PULL": config.fleet_image_pull or "",
        "CUA_FLEET_REPO": config.fleet_repo or "",
        "CUA_FLEET_PROFILE": config.fleet_profile,
        "CUA_FLEET_CPUS": config.fleet_cpus,
        "CUA_FLEET_MEMORY": config.fleet_memory,
        "CUA_FLEET_WIDTH": config.fleet_width,
        "CUA_FLEET_HEIGHT": config.fleet_height,
    }
    return "".join(f"{key}={shlex.quote(str(value))}\n" for key, value in values.items())


def agent_config(
    config: AwsProviderConfig,
    first_desktop: str,
    etc: str = ETC,
    state: str = STATE,
    bind: str = "0.0.0.0",
) -> dict[str, Any]:
    """The agent's JSON config (see fleet_agent.py): slot 0 starts leased to the
    desktop the host is launched for."""
    return {
        "slots": config.desktops_per_instance,
        "guest_port": config.guest_port,
        "control_port": config.control_port,
        "state_dir": state,
        "tls_dir": f"{etc}/tls",
        "desktop_command": [DESKTOP_SCRIPT],
        "bind": bind,
        "leases": {"0": first_desktop},
    }


def fleet_tags(slots: list[GuestPair], control: GuestPair) -> list[dict[str, str]]:
    """The fingerprint tags of one fleet host (public; keys never leave the user data)."""
    return [
        {"Key": TAG_KIND, "Value": "fleet-host"},
        {"Key": f"{TAG_TLS_SLOT}control", "Value": control.fingerprint},
        *({"Key": f"{TAG_TLS_SLOT}{i}", "Value": p.fingerprint} for i, p in enumerate(slots)),
    ]


def fleet_user_data(
    config: AwsProviderConfig, fleet: FleetLaunch, shutdown_minutes: int | None
) -> bytes:
    """The gzip-compressed cloud-config of one fleet host (see the module docstring)."""
    slots, control = fleet.slots, fleet.control
    if len(slots) != config.desktops_per_instance:
        raise ValueError(f"{len(slots)} pairs for {config.desktops_per_instance} slots")
    assert config.guest_token  # the config validator requires it with fleet-host
    secret = {"permissions": "0600", "owner": "root:root"}
    public = {"permissions": "0644", "owner": "root:root"}
    write: list[dict[str, Any]] = [
        {"path": f"{ETC}/fleet.env", **public, "content": fleet_env(config)},
        {
            "path": f"{ETC}/agent.json",
            **public,
            "content": json.dumps(agent_config(config, fleet.first_desktop), indent=1) + "\n",
        },
        {"path": f"{ETC}/tls/control.crt", **public, "content": control.cert_pem},
        {"path": f"{ETC}/tls/control.key", **secret, "content": control.key_pem},
        {
            "path": f"{ETC}/tls/control.token",
            **secret,
            "content": instance_token(config.guest_token, control.fingerprint) + "\n",
        },
    ]
    for i, pair in enumerate(slots):
        write += [
            {"path": f"{ETC}/tls/slot-{i}.crt", **public, "content": pair.cert_pem},
            {"path": f"{ETC}/tls/slot-{i}.key", **secret, "content": pair.key_pem},
            {
                "path": f"{ETC}/tokens/slot-{i}",
                **secret,
                "content": instance_token(config.guest_token, pair.fingerprint) + "\n",
            },
        ]
    write += [
        {"path": f"{ETC}/seccomp.json", **public, "content": profile_text()},
        {"path": DESKTOP_SCRIPT, "permissions": "0755", "content": DESKTOP_SH},
        {"path": HOST_SCRIPT, "permissions": "0755", "content": HOST_SH},
        {"path": AGENT, "permissions": "0644", "content": agent_source()},
    ]
    runcmd: list[list[str]] = [[HOST_SCRIPT]]
    if shutdown_minutes is not None:  # first, so a failing setup still ends the instance
        runcmd.insert(0, ["shutdown", "-h", f"+{shutdown_minutes}", "cua-rl ttl reached"])
    text = "#cloud-config\n" + yaml.dump(
        {"write_files": write, "runcmd": runcmd}, Dumper=_Dumper, sort_keys=False, width=1000
    )
    data = gzip.compress(text.encode(), mtime=0)
    if len(data) > USER_DATA_LIMIT:
        raise DesktopError(
            f"aws provider: fleet-host user data of {len(data)} bytes "
            f"(gzip) exceeds EC2's {USER_DATA_LIMIT}; lower "
            "desktops_per_instance"
        )
    return data
