"""`cua-rl bench inference` (cli/bench/inference.py): throughput and latency of the hf
engine and vLLM, side by side.

Each engine serves the tiny checkpoint from one replica that this command launches the
way a run does (`model_servers`), and answers policy-shaped requests: a turn with three
screenshots at the rollout's default resolution, one sample with logprobs, a fixed
number of new tokens (64 distinct prompts in turn). At each concurrency level, that
many clients send requests back to back for a fixed time; the figures are completed
requests per second and the median and 99th-percentile latency. Every level is
bounded in time, so the whole bench is too: about engines x (start-up + levels x
(seconds + the slowest request)).
"""

from __future__ import annotations

import asyncio
import io
import statistics
import tempfile
from pathlib import Path
from typing import Any

ENGINES = ("hf", "vllm")
DISTINCT_REQUESTS = 64
"""Requests cycle through this many different prompts."""


def policy_requests(count: int) -> list[list[dict[str, Any]]]:
    """`count` distinct policy turns, each with three screenshots of the size actors send
    (a 1920x1080 screen resized to the rollout's pixel budget, JPEG as the guest sends).

    Distinct images keep vLLM's prefix and multimodal caches from answering repeats,
    which a run's turns rarely are; built before timing starts."""
    from PIL import Image, ImageDraw

    from cua_rl.agent import policy_messages
    from cua_rl.agent.images import encode_image, resized_image_size
    from cua_rl.rollout.config import EpisodeConfig

    episode = EpisodeConfig()
    size = resized_image_size((1920, 1080), episode.min_pixels, episode.max_pixels)
    requests = []
    for r in range(count):
        shots = []
        for i, color in enumerate(("white", "lightgray", "beige")):
            image = Image.new("RGB", size, color)
            ImageDraw.Draw(image).rectangle(
                (100 + 7 * r, 80 + 40 * i, 700, 500), fill=(40 + r % 200, 90, 160)
            )
            buf = io.BytesIO()
            image.save(buf, format="JPEG", quality=episode.screenshot_quality)
            shots.append(
                encode_image(
                    buf.getvalue(), min_pixels=episode.min_pixels, max_pixels=episode.max_pixels
                )
            )
        requests.append(
            policy_messages(
                f"Open menu number {r}.", ["Action: click", "Action: type"], shots, (1920, 1080)
            )
        )
    return requests


def summarize(latencies_s: list[float], wall_s: float) -> dict[str, float]:
    """rps, p50_ms, p99_ms of one level (zeros when nothing completed)."""
    if not latencies_s:
        return {"rps": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "requests": 0}
    ordered = sorted(latencies_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "rps": round(len(ordered) / wall_s, 3),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "requests": len(ordered),
    }


async def run_level(
    url: str,
    requests: list[list[dict[str, Any]]],
    concurrency: int,
    seconds: float,
    max_tokens: int,
    timeout_s: float,
) -> dict[str, float]:
    """`concurrency` clients send requests back to back until `seconds` have passed."""
    from cua_rl.inference.client import InferenceClient

    client = InferenceClient(url, timeout_s=timeout_s)
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + seconds
    latencies: list[float] = []
    counter = iter(range(10**9))

    async def worker() -> None:
        while loop.time() < end:
            messages = requests[next(counter) % len(requests)]
            sent = loop.time()
            await client.chat(messages, temperature=1.0, max_tokens=max_tokens)
            latencies.append(loop.time() - sent)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    finally:
        await client.close()
    return summarize(latencies, loop.time() - start)


async def bench_engine(
    engine: str,
    model_dir: Path,
    work: Path,
    levels: list[int],
    seconds: float,
    max_tokens: int,
    ready_timeout_s: float,
) -> dict[str, dict[str, float]]:
    from cua_rl.inference.config import ModelServersConfig
    from cua_rl.inference.launcher import model_servers

    cfg = ModelServersConfig(
        engine=engine, model=str(model_dir), replicas=1, threads=2, ready_timeout_s=ready_timeout_s
    )
    requests = policy_requests(DISTINCT_REQUESTS)
    async with model_servers(cfg, name=engine, log_dir=work / "logs") as urls:
        await run_level(urls[0], requests[-1:], 1, 0.0, max_tokens, 600.0)  # warm-up
        return {
            str(c): await run_level(urls[0], requests, c, seconds, max_tokens, 600.0)
            for c in levels
        }


async def run_bench(
    engines: list[str],
    model_dir: Path | None,
    levels: list[int],
    seconds: float,
    max_tokens: int,
    ready_timeout_s: float,
) -> dict[str, Any]:
    from cua_rl.inference.vllm_engine import resolve_vllm_python

    if "vllm" in engines:
        resolve_vllm_python()  # fail in one line before starting anything
    with tempfile.TemporaryDirectory(prefix="cua-rl-bench-inference-") as tmp:
        work = Path(tmp)
        if model_dir is None:  # output quality does not matter here, only its length
            from cua_rl.inference.tiny_model import build_tiny_model

            model_dir = build_tiny_model(work / "tiny", seed=0, primed=False).path
        return {
            e: await bench_engine(e, model_dir, work, levels, seconds, max_tokens, ready_timeout_s)
            for e in engines
        }
