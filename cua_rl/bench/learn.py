"""`cua-rl bench learn` (cli/bench/learn.py): proof that the learner learns, end to end.

The tiny model is served by a real hf replica and sampled through the real
client by concurrent actors (prompts carry a screenshot); a response earns +1
when its first parsed action is the target kind, -1 otherwise, which varies
even before training (the tiny model is format-primed, not skilled). Groups of
G samples become advantages and are submitted as one group; the real learner
service trains on whole groups (`batch_groups` per update) with the
off-policy-corrected loss while the actors keep sampling, and the real weight
sync pushes every update to the replica. The figure is the mean reward of the
first updates versus the last, with the sample accounting of the learner
(collected = used + dropped as stale + unused at the end).
"""

from __future__ import annotations

import asyncio
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = "left_click"
INSTRUCTION = "Click the button in the middle of the screen."


def _screenshot_url() -> str:
    from PIL import Image, ImageDraw

    from cua_rl.agent.images import encode_image

    image = Image.new("RGB", (320, 200), "white")
    ImageDraw.Draw(image).rectangle((120, 80, 200, 120), fill="steelblue")
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return encode_image(buf.getvalue(), min_pixels=16384, max_pixels=65536)


FLAT_IN_A_ROW = 48
"""Groups in a row with one reward for all their samples after which `run_bench` stops:
the policy has converged (it always succeeds or always fails) and nothing is left to
learn. Generous: one group with a spread resets the count."""


def reward(text: str) -> float:
    from cua_rl.agent import parse_response

    actions, error = parse_response(text, (1920, 1080))
    return 1.0 if error is None and actions and actions[0].kind == TARGET else -1.0


async def run_bench(
    model_dir: Path,
    work: Path,
    *,
    updates: int,
    group: int,
    actors: int,
    lr: float,
    batch_groups: int = 1,
    temperature: float = 1.0,
    eta: int = 2,
    aggregation: str = "step",
    seed: int | None = None,
    max_wall_s: float | None = None,
    max_flat_in_a_row: int = FLAT_IN_A_ROW,
) -> dict[str, Any]:
    """Train until `updates` policy updates, `max_wall_s` of sampling and training, or
    `max_flat_in_a_row` groups in a row whose rewards are all equal, whichever comes
    first. Such a group carries no signal, and a policy that always succeeds (or always
    fails) gives nothing else: without the last bound it would sample forever (a
    clean-clone run here did, for 25 minutes, after its policy converged in 3 updates).
    `converged` in the result says that bound ended the run.

    A group whose rewards are all equal is still one RL step of `batch_groups`
    groups: a step with no sample makes no update, so `updates` (the version)
    counts steps that trained, and `flat_groups` those that could not.
    `seed`: the learner's torch seed and the base of each request's sampling seed
    (the request order between actors still varies, so runs differ a little)."""
    import itertools

    import torch

    from cua_rl.agent import policy_messages
    from cua_rl.inference.config import ModelServersConfig
    from cua_rl.inference.launcher import replica_set
    from cua_rl.inference.pool import InferencePool
    from cua_rl.learner.config import LearnerConfig, LearnerLoopConfig, LossConfig, WeightSyncConfig
    from cua_rl.learner.engines import build_engine
    from cua_rl.learner.service import LearnerService
    from cua_rl.learner.weight_sync import WeightSync
    from cua_rl.reward.advantages import standardize
    from cua_rl.staleness_gate import VersionGate
    from cua_rl.store.async_run_store import AsyncRunStore
    from cua_rl.types import StepSample

    if seed is not None:
        torch.manual_seed(seed)
    request_seeds = itertools.count(seed * 1_000_003) if seed is not None else None
    messages = policy_messages(INSTRUCTION, [], [_screenshot_url()], (1920, 1080))
    store = AsyncRunStore.open(work / "run")
    learner_cfg = LearnerConfig(
        lr=lr,
        temperature=temperature,
        loss=LossConfig(aggregation=aggregation),  # type: ignore[arg-type]  # click.Choice gives one of the Literal's values
    )
    loop = asyncio.get_running_loop()
    engine = await loop.run_in_executor(None, build_engine, learner_cfg, model_dir)
    gate = VersionGate(eta=eta)
    rewards_by_version: dict[int, list[float]] = {}
    servers_cfg = ModelServersConfig(model=str(model_dir), threads=1)
    async with replica_set(servers_cfg, name="bench", log_dir=work / "logs") as replicas:
        pool = InferencePool(replicas)
        sync = WeightSync(replicas, WeightSyncConfig(mode="collective"), work / "exports")
        # A queue of one update: sampling waits for the learner instead of producing
        # samples that go stale before they are trained on.
        service = LearnerService(
            "policy",
            engine,
            store,
            LearnerLoopConfig(queue_updates=1),
            checkpoint_dir=work / "ckpt",
            sync=sync,
            gate=gate,
            eta=eta,
            tasks_per_update=batch_groups,
        )

        flat_groups = 0  # groups with one reward for all samples: nothing to learn
        flat_in_a_row = 0

        async def actor() -> None:
            nonlocal flat_groups, flat_in_a_row
            while (
                service.version < updates
                and time.monotonic() < deadline
                and flat_in_a_row < max_flat_in_a_row
            ):
                await gate.wait_fresh()
                result = await pool.chat(
                    messages,
                    n=group,
                    temperature=temperature,
                    max_tokens=64,
                    seed=next(request_seeds) if request_seeds is not None else None,
                )
                version = result.model_version or 0
                scores = [reward(c.text) for c in result.choices]
                rewards_by_version.setdefault(version, []).extend(scores)
                advantages = standardize(scores)
                flat = all(abs(a) <= 1e-6 for a in advantages)
                flat_groups += flat
                flat_in_a_row = flat_in_a_row + 1 if flat else 0
                await service.submit(
                    [
                        StepSample(
                            tuple(messages),
                            c.token_ids,
                            c.logprobs,
                            version,
                            a,
                            trajectory_id=f"v{version}-{id(result)}-{k}",
                            step_index=0,
                        )
                        for k, (c, a) in enumerate(zip(result.choices, advantages, strict=True))
                        if abs(a) > 1e-6 and c.token_ids
                    ]
                )

        started = time.monotonic()
        deadline = started + (max_wall_s if max_wall_s is not None else float("inf"))
        learner = asyncio.create_task(service.run(max_updates=updates))
        await asyncio.gather(*(actor() for _ in range(actors)))
        await service.finish()
        await learner
        await service.close()
        await sync.close()
        await pool.close()
    await store.close()
    versions = sorted(rewards_by_version)
    window = max(1, len(versions) // 4)
    first = [r for v in versions[:window] for r in rewards_by_version[v]]
    last = [r for v in versions[-window:] for r in rewards_by_version[v]]
    return {
        "reward_first": statistics.fmean(first),
        "reward_last": statistics.fmean(last),
        "rise": statistics.fmean(last) - statistics.fmean(first),
        "updates": service.version,
        "eta": eta,
        "aggregation": aggregation,
        "seed": seed,
        "samples_collected": service.samples_collected,
        "samples_used": service.samples_used,
        "samples_dropped_stale": service.stale_dropped,
        "samples_unused_at_end": service.unused_at_end,
        "flat_groups": flat_groups,
        "converged": flat_in_a_row >= max_flat_in_a_row,
        "curve": {v: round(statistics.fmean(rewards_by_version[v]), 3) for v in versions},
        "samples": sum(len(v) for v in rewards_by_version.values()),
        "wall_s": round(time.monotonic() - started, 1),
    }


def measure(
    model_dir: Path | None = None,
    *,
    updates: int,
    group: int,
    actors: int,
    lr: float,
    max_wall_s: float | None,
    eta: int = 2,
    batch_groups: int = 1,
    aggregation: str = "step",
    seed: int | None = None,
) -> dict[str, Any]:
    """`run_bench` in a temporary work folder, from `model_dir` or the cached
    format-primed tiny model (built when missing)."""
    from cua_rl.inference.launcher import default_tiny_dir, ensure_tiny_model

    async def main() -> dict[str, Any]:
        model = model_dir or await ensure_tiny_model(default_tiny_dir())
        with tempfile.TemporaryDirectory(prefix="cua-bench-learn-") as work:
            return await run_bench(
                model,
                Path(work),
                updates=updates,
                group=group,
                actors=actors,
                lr=lr,
                max_wall_s=max_wall_s,
                eta=eta,
                batch_groups=batch_groups,
                aggregation=aggregation,
                seed=seed,
            )

    return asyncio.run(main())
