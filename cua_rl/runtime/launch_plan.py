"""`cua-rl train --dry-run`: every process the run would start, where, on which devices,
with which command and environment, without starting anything.

Built by the code the launch itself uses, not a second description of it: the device
layout (runtime/devices.py), `launcher.replica_launch` for model replicas,
`rank_process.rank_launch` for learner rank processes, `devices.driver_launch` for
the driver. A real run records the same `ProcessLaunch` records as it starts each
process (RUN_DIR/launch.jsonl, process_launch.py), so the two compare argument for
argument once what only a start decides is normalized (`normalized`: ports, the
driver's pid, a rank's socket descriptor). Under `runtime: ray` it is the bundles Ray
is asked for and the node each would land on (runtime/ray/dry_run.py).
"""

from __future__ import annotations

from typing import Any

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.inference.config import TINY
from cua_rl.inference.launcher import default_tiny_dir, replica_launch, resolve_model
from cua_rl.learner.rank_process import rank_launch
from cua_rl.process_launch import ProcessLaunch
from cua_rl.runtime.devices import (
    DeviceLayout,
    device_layout,
    driver_launch,
    node_gpus,
    rank_devices,
    replica_devices,
)
from cua_rl.runtime.launch_records import desktops_summary, normalized, vllm_python
from cua_rl.runtime.node_spec import NodeSpec


def dry_run(
    cfg: RunConfig, nodes: list[NodeSpec] | None = None, *, training: bool = True
) -> dict[str, Any]:
    """The run's launch: `nodes` as declared (`--nodes`), else this machine's GPUs.
    `training`: a `train` run (learners, the rewriter); False: `rollout` or `eval`,
    whose only processes are the model pools and the desktops. A layout that does not
    fit raises `ConfigError` in one line."""
    if not training:
        cfg = cfg.model_copy(update={"adapt": cfg.adapt.model_copy(update={"enabled": False})})
    if cfg.runtime == "ray":
        from cua_rl.runtime.ray.dry_run import ray_dry_run

        return ray_dry_run(cfg, nodes or [NodeSpec("node0", len(node_gpus(cfg)))])
    node = nodes[0] if nodes else NodeSpec("driver", len(found := node_gpus(cfg)))
    gpus = node.gpu_ids if nodes else tuple(found)
    layout = device_layout(cfg, gpus, learners=training)
    launches = (
        [driver_launch(layout)]
        + (learner_launches(cfg, layout) if training else [])
        + replica_launches(cfg, layout)
    )
    notes = []
    if nodes and len(nodes) > 1:
        notes.append(
            f"runtime local runs on one machine: only {node.name} of the "
            f"{len(nodes)} nodes given is used (runtime=ray spreads a run)"
        )
    if layout.shared:
        notes.append("resources.share_gpus: some devices serve more than one process")
    return {
        "runtime": "local",
        "nodes": [node.as_dict()],
        "processes": [normalized(launch.as_dict()) for launch in launches],
        "gpus": {"needed": sum(u.gpus for u in layout.users), "node": len(gpus)},
        "desktops": desktops_summary(cfg, "the driver's machine"),
        "notes": notes,
    }


def learner_launches(cfg: RunConfig, layout: DeviceLayout) -> list[ProcessLaunch]:
    """The learners as the driver starts them (start_engines): rank processes for a
    learner of several ranks, an in-process record for one of one rank."""
    out = []
    for role in run_roles(cfg).learners:
        learner = getattr(cfg.train, role)
        if learner.ranks > 1:
            devices = rank_devices(layout, role, learner.ranks)
            out += [
                rank_launch(learner, role, r, 0, devices[r] if devices else None)
                for r in range(learner.ranks)
            ]
        else:
            devices = layout.assigned.get(f"{role} learner (in the driver)", ())
            out.append(ProcessLaunch(f"{role} learner (in the driver)", (), {}, devices))
    return out


def replica_launches(cfg: RunConfig, layout: DeviceLayout) -> list[ProcessLaunch]:
    """Every model replica the run starts on this machine (launcher.replica_set)."""
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    pools = {"policy": cfg.policy, "prm": cfg.prm, "rewriter": cfg.adapt.rewriter.pool}
    out = []
    for name in run_roles(cfg).pools:
        servers = pools[name]
        if servers.urls:
            continue  # started elsewhere
        model = str(tiny) if servers.model == TINY else resolve_model(servers, tiny)
        python = vllm_python(servers.python) if servers.engine == "vllm" else None
        devices = replica_devices(layout, name, servers.replicas)
        out += [
            replica_launch(
                servers,
                name=name,
                index=i,
                model=model,
                port=1,
                version=0,
                token="dry-run",
                python=python,
                devices=devices[i] if devices else None,
            )
            for i in range(servers.replicas)
        ]
    return out


def render_dry_run(plan: dict[str, Any]) -> str:
    """The dry run as text: one block per process."""
    nodes = ", ".join(f"{n['name']} ({n['gpus']} GPUs)" for n in plan["nodes"])
    lines = [f"Dry run (runtime: {plan['runtime']}; nodes: {nodes}); nothing was started"]
    for p in plan["processes"]:
        devices = ",".join(p["devices"]) or "none"
        lines.append(f"- {p['role']}: node {p['node']}, GPUs {devices}")
        for key in ("placement_group", "bundle"):
            if key in p:
                lines.append(f"    {key.replace('_', ' ')}: {p[key]}")
        if p["argv"]:
            lines.append(f"    command: {' '.join(p['argv'])}")
        if p["env"]:
            lines.append("    env: " + " ".join(f"{k}={v}" for k, v in sorted(p["env"].items())))
    d = plan["desktops"]
    cpus = "no CPU cap" if d["vcpus"] is None else f"{d['vcpus']:g} vCPUs"
    lines.append(
        f"- desktops: {d['count']} {d['provider']} on {d['where']}; each {cpus}, "
        f"{d['memory_gib']:g} GiB; reset: {d['reset']}"
    )
    lines += [f"note: {n}" for n in plan["notes"]]
    return "\n".join(lines) + "\n"
