"""report.md's "What ran": the manifest in a few lines a reader checks before the
figures (the whole of it is manifest.json beside the report)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _short(value: Any, n: int = 12) -> str:
    return "–" if not value else str(value)[:n]


def _known(value: Any, part: Mapping[str, Any]) -> str:
    """A short id, or `unknown (why)`."""
    if value:
        return str(value)[:19]
    return f"unknown ({str(part.get('error', 'not recorded'))[:80]})"


def _model_line(model: Mapping[str, Any]) -> str:
    engine = model.get("engine") or {}
    version = next(
        (f"{k} {v}" for k, v in engine.items() if k in ("vllm", "transformers") and v),
        "version unknown",
    )
    ident = model.get("identity")
    if not ident:
        return (
            f"- **Model:** `{model.get('name')}` on {engine.get('engine')} ({version}); "
            "weights not on this machine, identified by name only"
        )
    weights = ident.get("weights") or []
    size = sum(w["bytes"] for w in weights) / 1e9
    dtypes = sorted({d for w in weights for d in w.get("dtypes", {})})
    full = f", content {_short(ident['content_hash'])}" if ident.get("content_hash") else ""
    return (
        f"- **Model:** `{model.get('name')}` on {engine.get('engine')} ({version}); "
        f"{len(weights)} weight file(s), {size:.2f} GB, {'/'.join(dtypes) or '–'}; "
        f"identity {_short(ident.get('quick_id'))}{full}; tokenizer "
        f"{_short(ident.get('tokenizer_hash'))}, chat template "
        f"{_short(ident.get('chat_template_hash'))}"
    )


def _desktops_line(desktops: Mapping[str, Any]) -> str:
    image = desktops.get("image") or {}
    if desktops.get("provider") == "local":
        apps = ", ".join(f"{k} {v}" for k, v in (image.get("apps") or {}).items() if v)
        what = f"guest {_short(image.get('guest_hash'))}; {apps}"
    else:
        parts = []
        for name in ("container", "disk"):
            part = image.get(name) or {}
            if part:
                parts.append(f"{name} {_known(part.get('id') or part.get('quick_id'), part)}")
        if image.get("image"):
            parts.append(f"image {image['image']} {_known(image.get('id'), image)}")
        if image.get("ami_id"):
            parts.append(f"AMI {image['ami_id']}")
        what = "; ".join(parts) or "image unknown"
    network = "with" if desktops.get("network") else "without"
    return (
        f"- **Desktops:** {desktops.get('count')} × `{desktops.get('provider')}` "
        f"({network} a network); {what}"
    )


def summary_lines(manifest: Mapping[str, Any]) -> list[str]:
    """ "What ran" as Markdown lines (model, agent, protocol, desktops, tasks, run)."""
    agent, tasks, run = (
        manifest.get("agent", {}),
        manifest.get("tasks", {}),
        manifest.get("run", {}),
    )
    sampling = agent.get("sampling", {})
    proto = agent.get("protocol", {})
    deviations = proto.get("deviations") or []
    code = run.get("code", {})
    checkout = (tasks.get("osworld_checkout") or {}).get("git") or {}
    seeds = (
        ", ".join(f"{k} {v}" for k, v in (run.get("seeds") or {}).items() if v is not None)
        or "none"
    )
    lines = [
        "## What ran",
        "",
        "The whole record is `manifest.json` beside this report.",
        "",
        _model_line(manifest.get("model", {})),
        f"- **Agent:** prompt {_short(agent.get('prompt_hash'))}; "
        f"{agent.get('action_space')} actions, {agent.get('observation_type')} "
        f"observations at {'x'.join(map(str, agent.get('screen', [])))} (model sees "
        f"{'x'.join(map(str, agent.get('model_image_size', [])))}); "
        f"{agent.get('history_images')} images in the history, "
        f"{agent.get('screenshot_format')}"
        + (f" quality {agent['screenshot_quality']}" if agent.get("screenshot_quality") else "")
        + f"; temperature {sampling.get('temperature')}, top_p {sampling.get('top_p')}, "
        f"{sampling.get('max_tokens')} tokens per step, {agent.get('max_steps')} steps",
        "- **Protocol:** OSWorld-Verified"
        + ("; deviations: " + "; ".join(deviations) if deviations else ", no deviation"),
        _desktops_line(manifest.get("desktops", {})),
        f"- **Tasks:** {tasks.get('count')} from `{tasks.get('source')}` (split "
        f"{tasks.get('split')})"
        + (
            f"; OSWorld checkout at {_short(checkout.get('commit'))}"
            + (" with uncommitted changes" if checkout.get("dirty") else "")
            if checkout
            else ""
        ),
        f"- **Run:** code {_short(code.get('commit'))}"
        + (" with uncommitted changes" if code.get("dirty") else "")
        + f"; seeds {seeds}; {run.get('runs')} run(s) per task; started "
        f"{run.get('started_at')}, ended {run.get('ended_at') or '(not yet)'}",
    ]
    like = manifest.get("like")
    if like:
        lines.append(
            f"- **Rerun of** `{like.get('run_dir')}`: "
            + ("; ".join(like.get("differences") or []) or "no difference found")
        )
    for entry in manifest.get("invocations", []):
        if entry.get("differences"):
            lines.append(
                f"- **Resumed** {entry.get('started_at')} with differences: "
                + "; ".join(entry["differences"])
            )
    return lines
