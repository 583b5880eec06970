"""The machines a dry run lays a run out on, from `--nodes 3x8gpu` and the like.

Grammar, groups joined by commas, in node order (the first node is the driver's,
Ray's head):

- `KxGgpu`: K nodes of G GPUs each (`1x8gpu`, `3x8gpu`);
- `KxGgpu:Ccpu`: with C CPUs each (`2x8gpu:96cpu`); without it a node's CPUs are not
  counted (no CPU bundle is ever refused for want of CPUs);
- `Kxcpu:Ccpu`: K nodes without GPUs, C CPUs each (`4xcpu:64cpu`), e.g. for fleet
  workers and their desktops;
- `+name` or `+name=N` after a group: a Ray custom resource each of its nodes offers
  (`4xcpu:16cpu+fleet`, for `ray.worker_resources={fleet: 1}`); a bundle that claims a
  custom resource fits only nodes that offer enough of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cua_rl.errors import ConfigError

_GROUP = re.compile(
    r"^(?P<k>\d+)x(?:(?P<gpus>\d+)gpu|cpu)(?::(?P<cpus>\d+)cpu)?"
    r"(?P<custom>(?:\+[A-Za-z_][\w-]*(?:=\d+(?:\.\d+)?)?)*)$"
)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    cpus: int | None = None
    """None: not counted."""
    resources: tuple[tuple[str, float], ...] = ()
    """Custom Ray resources the node offers."""

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(str(i) for i in range(self.gpus))

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "gpus": self.gpus,
            "cpus": self.cpus,
            "resources": dict(self.resources),
        }


def parse_nodes(text: str) -> list[NodeSpec]:
    """The nodes `text` describes, named node0, node1, ...; a malformed group is refused
    in one line."""
    nodes: list[NodeSpec] = []
    for group in (g.strip() for g in text.split(",")):
        match = _GROUP.match(group)
        if match is None or int(match["k"]) < 1:
            raise ConfigError(
                f"--nodes {text!r}: {group!r} is not KxGgpu, KxGgpu:Ccpu or "
                "Kxcpu:Ccpu, each with optional +resource[=N] (e.g. 3x8gpu, "
                "1x8gpu,4xcpu:64cpu+fleet)"
            )
        gpus = int(match["gpus"] or 0)
        cpus = int(match["cpus"]) if match["cpus"] else None
        if match["gpus"] is None and cpus is None:
            raise ConfigError(
                f"--nodes {text!r}: a CPU node group needs its CPUs, e.g. {group}:64cpu"
            )
        custom = tuple(
            (name, float(amount or 1))
            for name, _, amount in (
                part.partition("=") for part in match["custom"].split("+") if part
            )
        )
        nodes += [
            NodeSpec(f"node{len(nodes) + i}", gpus, cpus, custom) for i in range(int(match["k"]))
        ]
    return nodes
